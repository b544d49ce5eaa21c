package graphql

import (
	"strings"
	"testing"
)

// benchDocs are documents as the providers meet them, and hostile ones.
var benchDocs = []struct{ name, doc string }{
	{"github", `query { viewer { login repositories(first: 100) { edges { node { id issues(first: 50) { totalCount edges { node { id labels(first: 60) { edges { node { name } } } } } } } } } } }`},
	{"shopify", `query Products($first: Int!, $after: String) @inContext(country: CA) { products(first: $first, after: $after) { edges { cursor node { id title ...ProductParts variants(first: 100) { nodes { id price inventoryItem { id } } } metafields(first: 10) @include(if: true) { nodes { key value } } } } pageInfo { hasNextPage } } } fragment ProductParts on Product { handle vendor images(first: 5) { nodes { url } } }`},
	{"deep-100000", strings.Repeat("{ a ", 100000) + strings.Repeat("}", 100000)},
	{"list-100000", "{ a(x: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + ") }"},
}

// BenchmarkParse measures a parse of each document.
func BenchmarkParse(b *testing.B) {
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse(d.doc)
			}
		})
	}
}
