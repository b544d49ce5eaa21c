package shopify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/shopsim"
)

// FuzzEstimate feeds the cost estimator arbitrary queries and variables:
// it must never panic, must price a body the same every time between 1
// and 1,000 points, and must never price a query the simulator accepts
// below the cost the simulator requests for it (up to 1,000, the most a
// query Shopify runs may request).
//
//	go test ./providers/shopify -run '^$' -fuzz FuzzEstimate -fuzztime 5m
func FuzzEstimate(f *testing.F) {
	for _, q := range appQueries {
		f.Add(q.query, q.variables)
	}
	for _, q := range []string{
		`{ shop { name } }`,
		`{ a(first: 250) { b(first: 250) { c { id } } } }`,
		`query($n: Int) { a(last: $n) { edges { node { id } } pageInfo { hasNextPage } } }`,
		`{ a { ...F } } fragment F on T { ...F }`,
		`{ a { ...F } } fragment F on T { b(first: 3) { ... on U { c { id } } ...G } } fragment G on T { d { e } }`,
		`mutation { a { b } c(first: 2) { d { e } } }`,
		strings.Repeat("{ a(first: 2) ", 130) + strings.Repeat("}", 130),
		`{ a(first: 99999999999999999999) { b { id } } }`,
	} {
		f.Add(q, `{"n": 7}`)
	}
	f.Fuzz(func(t *testing.T, query, variables string) {
		var vars map[string]json.RawMessage
		if json.Unmarshal([]byte(variables), &vars) != nil {
			vars = nil
		}
		raw, _ := json.Marshal(vars)
		b := body(query, string(raw))
		points, err := estimate(b)
		if err != nil {
			if points != 0 {
				t.Fatalf("an error (%v) with %d points", err, points)
			}
			return
		}
		if points < 1 || points > maxQueryCost {
			t.Fatalf("%d points", points)
		}
		if again, err := estimate(b); err != nil || again != points {
			t.Fatalf("priced %d, then %d (%v)", points, again, err)
		}
		requested, _, err := shopsim.Price(query, "", vars, 0)
		if err == nil && points < min(requested, maxQueryCost) {
			t.Fatalf("estimated %d points, the simulator requests %d", points, requested)
		}
	})
}

// FuzzAnswer feeds the reader of Shopify's answers arbitrary bodies and
// headers: it must never panic, and what it reads of a bucket must be a
// size of at least 1 with no more used than its size.
//
//	go test ./providers/shopify -run '^$' -fuzz FuzzAnswer -fuzztime 5m
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"data":{},"extensions":{"cost":{"requestedQueryCost":52,"actualQueryCost":12,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":988.0,"restoreRate":50.0}}}}`,
		`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":252,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":2000,"currentlyAvailable":100,"restoreRate":100}}}}`,
		`{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1e308,"currentlyAvailable":-1e308,"restoreRate":1e-308}}}}`,
		`{"errors":"oops"}`,
		``,
	} {
		f.Add([]byte(s), "32/40", "2.0")
	}
	f.Fuzz(func(t *testing.T, body []byte, callLimitHeader, retry string) {
		a := &answer{}
		a.read(body)
		if a.size != 0 && (a.size < 1 || a.used < 0 || a.used > a.size) {
			t.Fatalf("read a bucket of %d, %d used", a.size, a.used)
		}
		if a.throttled && a.rate < 0 {
			t.Fatalf("a restore rate of %v", a.rate)
		}
		if used, size, ok := callLimit(callLimitHeader); ok && (size < 1 || used < 0 || used > size) {
			t.Fatalf("callLimit(%q) = %d, %d", callLimitHeader, used, size)
		}
		if d := retryAfter(retry); d < minPause || d > maxPause {
			t.Fatalf("retryAfter(%q) = %v", retry, d)
		}
	})
}
