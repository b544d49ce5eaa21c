package github

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
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

// FuzzUpstream feeds the refusal reader arbitrary statuses, rate-limit
// headers and bodies, to REST and GraphQL endpoints: it must never panic,
// must leave the body whole for the caller, may call a response spent
// only for a 403, a 429 or a GraphQL answer, and pauses for a bounded,
// positive time.
//
//	go test ./providers/github -run '^$' -fuzz FuzzUpstream -fuzztime 5m
func FuzzUpstream(f *testing.F) {
	primary := `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`
	secondary := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	limited := `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}`
	f.Add(403, false, "0", "1700000000", "core", "", []byte(primary))
	f.Add(429, false, "12", "", "", "60", []byte(secondary))
	f.Add(403, false, "4999", "99999999999999999999", "search", "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{"message":"Resource not accessible by integration"}`))
	f.Add(200, true, "0", "1700000000", "graphql", "", []byte(limited))
	f.Add(403, false, "0", "32503680000", "core", "", []byte(primary)) // the year 3000
	f.Add(200, true, "-1", "-1", "\x00", "-5", []byte(`{"data":{"rateLimit":{"cost":1e400}}}`))
	f.Add(429, true, " 0 ", "1e9", "", "9223372036854775807", []byte("<html>slow down</html>"))
	rest := costs.Endpoint{Name: endpointRead, Charges: []costs.Charge{{Bucket: Core, Units: 1}}}
	gql := costs.Endpoint{Name: endpointQuery, Charges: []costs.Charge{{Bucket: GraphQL, Units: 1}}}
	read := Upstream(0)
	f.Fuzz(func(t *testing.T, status int, graphQL bool, remaining, reset, resource, retryAfter string, body []byte) {
		h := http.Header{}
		for k, v := range map[string]string{"X-RateLimit-Remaining": remaining, "X-RateLimit-Reset": reset, "X-RateLimit-Resource": resource, "Retry-After": retryAfter} {
			if v != "" {
				h.Set(k, v)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/user", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
		e := rest
		if graphQL {
			e = gql
		}
		v := read(resp, e)
		if v.Spent && status != 403 && status != 429 && !(graphQL && status == 200) {
			t.Fatalf("status %d read as spent", status)
		}
		if v.Spent && (v.Pause <= 0 || v.Pause > 366*24*time.Hour) {
			t.Fatalf("pause %v", v.Pause)
		}
		left, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(left, body) {
			t.Fatalf("the body was not left whole")
		}
	})
}
