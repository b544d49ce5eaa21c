package github

import (
	"strings"
	"testing"
)

// FuzzQueryCost feeds the GraphQL pricer arbitrary request bodies: it must
// never panic, must either fail with an error or price the body between 1
// point and what its cap allows, and must price a body the same every
// time.
//
//	go test ./providers/github -run '^$' -fuzz FuzzQueryCost -fuzztime 5m
func FuzzQueryCost(f *testing.F) {
	for _, b := range [][]byte{
		body(docExample),
		body(`{ viewer { login } rateLimit { cost remaining resetAt } }`),
		body(`query($n: Int = 10) { a(first: $n) { ...F } } fragment F on T { b(last: 100) { id } }`, `{"n": 100}`),
		body(`mutation M { createIssue(input: {title: "x"}) { issue { id } } }`, `{}`, "M"),
		body(`{ a { ...F } } fragment F on T { ...F }`),
		body(`{ a(first: 99999999999999999999, last: -99999999999999999999) { id } }`),
		body(strings.Repeat("{ a(first: 100) ", 130) + strings.Repeat("}", 130)),
		body(`query($n: Int) { a(first: $n) { id } }`, `{"n": 1e400}`),
		[]byte(`{"query": "{ a }", "variables": [1, 2]}`),
		[]byte(`{"query": "\ufeff{ a(s: \"\\u{1F600}\") }"}`),
		[]byte(`not json`),
		[]byte(``),
		[]byte(`null`),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		points, mutation, err := queryCost(b)
		if err != nil {
			if points != 0 || mutation {
				t.Fatalf("an error (%v) with %d points, mutation %v", err, points, mutation)
			}
			return
		}
		if points < 1 || points > pointsOf(maxRequests) {
			t.Fatalf("%d points", points)
		}
		again, m2, err := queryCost(b)
		if err != nil || again != points || m2 != mutation {
			t.Fatalf("priced %d (mutation %v), then %d (%v, %v)", points, mutation, again, m2, err)
		}
	})
}
