package shopify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/shopsim"
)

// body is a GraphQL request body of query, with variables (JSON) and an
// operation name when given, as the Transport reads it.
func body(query string, extra ...string) []byte {
	r := graphQLRequest{Query: query}
	if len(extra) > 0 && extra[0] != "" {
		json.Unmarshal([]byte(extra[0]), &r.Variables)
	}
	if len(extra) > 1 {
		r.OperationName = extra[1]
	}
	b, _ := json.Marshal(r)
	return b
}

// Queries as apps send them: a catalogue sync, an order sync, a bulk
// mutation, with fragments, variables, directives and aliases.
var appQueries = []struct {
	name, query, variables string
}{
	{"products page", `query Products($first: Int!, $after: String) { products(first: $first, after: $after) { edges { cursor node { id title handle vendor } } pageInfo { hasNextPage endCursor } } }`, `{"first": 50}`},
	{"products with variants", `query { products(first: 10) { nodes { id title variants(first: 20) { nodes { id sku price inventoryItem { id } } } } } }`, ``},
	{"orders with fragments", `query Orders($n: Int = 25) { orders(first: $n, reverse: true) { edges { node { ...OrderParts } } } } fragment OrderParts on Order { id name totalPriceSet { shopMoney { amount currencyCode } } lineItems(first: 5) { nodes { title quantity } } }`, ``},
	{"aliases and directives", `query($withImages: Boolean = false) { recent: products(first: 5, sortKey: CREATED_AT) { nodes { id } } updated: products(first: 5, sortKey: UPDATED_AT) { nodes { id images(first: 3) @include(if: $withImages) { nodes { url } } } } shop { name } }`, ``},
	{"inline fragments", `query { nodes(ids: ["gid://shopify/Product/1"]) { ... on Product { id title } ... on Collection { id products(first: 3) { nodes { id } } } } }`, ``},
	{"mutation", `mutation Set($input: ProductInput!) { productUpdate(input: $input) { product { id } userErrors { field message } } }`, `{"input": {"id": "gid://shopify/Product/1", "title": "x"}}`},
	{"last page", `{ customers(last: 250) { edges { node { id email } } } }`, ``},
}

func TestEstimateNeverBelowShopify(t *testing.T) {
	for _, c := range appQueries {
		t.Run(c.name, func(t *testing.T) {
			var vars map[string]json.RawMessage
			if c.variables != "" {
				json.Unmarshal([]byte(c.variables), &vars)
			}
			requested, _, err := shopsim.Price(c.query, "", vars, 0)
			if err != nil {
				t.Fatalf("the simulator refuses the query: %v", err)
			}
			got, err := estimate(body(c.query, c.variables))
			if err != nil {
				t.Fatalf("estimate: %v", err)
			}
			if got < min(requested, maxQueryCost) {
				t.Errorf("estimate = %d, below the requested cost %d", got, requested)
			}
			t.Logf("estimate %d, requested %d", got, requested)
		})
	}
}

func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		want int64
	}{
		{"scalars only", body(`{ shop { name } }`), 1},
		{"a connection", body(`{ products(first: 10) { nodes { id } } }`), 2 + 10},
		{"edges and pageInfo", body(`{ products(first: 10) { edges { cursor node { id } } pageInfo { hasNextPage } } }`), 2 + 1 + 10},
		{"nested connections", body(`{ products(first: 10) { nodes { id variants(first: 5) { nodes { sku } } } } }`), 2 + 10*(1+2+5)},
		{"a variable's default", body(`query($n: Int = 3) { products(first: $n) { nodes { id } } }`), 2 + 3},
		{"a variable given", body(`query($n: Int = 3) { products(first: $n) { nodes { id } } }`, `{"n": 4}`), 2 + 4},
		{"a variable not given is 250", body(`query($n: Int) { products(first: $n) { nodes { id } } }`), 2 + 250},
		{"a page over 250 is 250", body(`{ products(first: 1000) { nodes { id } } }`), 2 + 250},
		{"a mutation", body(`mutation { productDelete(input: {id: "x"}) { deletedProductId } }`), 11},
		{"capped at 1,000", body(`{ a(first: 250) { b(first: 250) { c { id } } } }`), 1000},
		{"the operation named", body(`query A { shop { name } } query B { products(first: 5) { nodes { id } } }`, ``, "A"), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := estimate(c.body)
			if err != nil || got != c.want {
				t.Errorf("estimate = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

func TestEstimateRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte(`{ shop { name } }`), "not a GraphQL request"},
		{"no query", []byte(`{"variables": {}}`), "not a GraphQL request"},
		{"a syntax error", body(`{ shop { name }`), "the GraphQL query"},
		{"an operation it lacks", body(`query A { shop { id } }`, ``, "B"), `no operation named "B"`},
		{"a fragment cycle", body(`{ shop { ...F } } fragment F on Shop { ...G } fragment G on Shop { ...F }`), "nest too deep"},
		{"an undefined fragment", body(`{ shop { ...F } }`), `fragment "F"`},
		{"fragments that double", body(`{ a { ...F0 } } ` + doubling(30)), "selects more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := estimate(c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("estimate: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// doubling returns n fragments, each spreading the next twice: a short
// document whose selections, walked, double n times.
func doubling(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("fragment F" + itoa(i) + " on T { a { ...F" + itoa(i+1) + " } b { ...F" + itoa(i+1) + " } } ")
	}
	b.WriteString("fragment F" + itoa(n) + " on T { id } ")
	return b.String()
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
