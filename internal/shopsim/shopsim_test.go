package shopsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// start serves a Server on a clock frozen at a fixed instant.
func start(t *testing.T, cfg Config) (*Server, *httptest.Server, *testclock.Clock) {
	t.Helper()
	clock := testclock.New(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	cfg.Now = clock.Now
	s := New(cfg)
	api := httptest.NewServer(s)
	t.Cleanup(api.Close)
	return s, api, clock
}

// cost is an answer's extensions.cost.
type cost struct {
	Requested      *int64 `json:"requestedQueryCost"`
	Actual         *int64 `json:"actualQueryCost"`
	ThrottleStatus struct {
		MaximumAvailable   float64 `json:"maximumAvailable"`
		CurrentlyAvailable float64 `json:"currentlyAvailable"`
		RestoreRate        float64 `json:"restoreRate"`
	} `json:"throttleStatus"`
}

// query posts a GraphQL query and returns its status, cost and error code.
func query(t *testing.T, api *httptest.Server, q string) (int, cost, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"query": q})
	req, _ := http.NewRequest("POST", api.URL+"/admin/api/2025-10/graphql.json", strings.NewReader(string(b)))
	req.Header.Set("X-Shopify-Access-Token", "shpat_x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Errors []struct {
			Extensions struct{ Code string } `json:"extensions"`
		} `json:"errors"`
		Extensions struct{ Cost cost } `json:"extensions"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	code := ""
	if len(out.Errors) > 0 {
		code = out.Errors[0].Extensions.Code
	}
	return resp.StatusCode, out.Extensions.Cost, code
}

func TestPrice(t *testing.T) {
	for _, c := range []struct {
		query             string
		requested, actual int64
	}{
		{`{ shop { name } }`, 1, 1},
		{`{ products(first: 10) { edges { cursor node { id title } } pageInfo { hasNextPage } } }`, 12, 2 + 3},
		{`{ products(first: 10) { nodes { id variants(first: 5) { nodes { sku } } } } }`, 2 + 10*(1+2+5), 2 + 3*(1+2+3)},
		{`mutation { productUpdate(input: {id: "x"}) { product { id } } }`, 10, 10},
		{`{ a { ...F } } fragment F on T { b(first: 4) { nodes { id } } }`, 1 + 2 + 4, 1 + 2 + 3},
	} {
		requested, actual, err := Price(c.query, "", nil, 3)
		if err != nil || requested != c.requested || actual != c.actual {
			t.Errorf("Price(%s) = %d, %d, %v; want %d, %d", c.query, requested, actual, err, c.requested, c.actual)
		}
	}
	for _, bad := range []string{`{ a(first: 251) { id } }`, `{ a(first: 0) { id } }`, `query($n: Int) { a(first: $n) { id } }`,
		`{ a { ...F } } fragment F on T { ...F }`, `{ a {`} {
		if _, _, err := Price(bad, "", nil, 0); err == nil {
			t.Errorf("Price(%s) accepted it", bad)
		}
	}
}

func TestBucket(t *testing.T) {
	s, api, clock := start(t, Config{Items: 10})
	const page = `{ products(first: 250) { nodes { id } } }` // 252 requested, 12 actual
	status, c, code := query(t, api, page)
	if status != 200 || code != "" || *c.Requested != 252 || *c.Actual != 12 || c.ThrottleStatus.CurrentlyAvailable != 988 {
		t.Fatalf("first query: %d %q %+v", status, code, c)
	}
	s.cfg.Items = 0 // full pages from now on
	for range 3 {
		query(t, api, page)
	}
	// 988 - 3*252 = 232 left: the next is throttled, spending nothing.
	status, c, code = query(t, api, page)
	if status != 200 || code != "THROTTLED" || c.Actual != nil || c.ThrottleStatus.CurrentlyAvailable != 232 {
		t.Fatalf("a query the bucket cannot hold: %d %q %+v", status, code, c)
	}
	clock.Add(time.Second) // 50 restored
	if _, c, code = query(t, api, page); code != "" || c.ThrottleStatus.CurrentlyAvailable != 282-252 {
		t.Fatalf("after a second's restore: %q %+v", code, c)
	}
	if st := s.Stats(); st.Queries != 5 || st.Throttled != 1 || st.Lowest != 30 || st.Points != 12+4*252 {
		t.Errorf("stats %+v", st)
	}
	if _, _, code = query(t, api, `{ a(first: 250) { b(first: 250) { c { id } } } }`); code != "MAX_COST_EXCEEDED" {
		t.Errorf("a query over 1,000 points: %q", code)
	}
}

func TestREST(t *testing.T) {
	s, api, clock := start(t, Config{})
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", api.URL+"/admin/api/2025-10/shop.json", nil)
		req.Header.Set("X-Shopify-Access-Token", "shpat_x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := 1; i <= 40; i++ {
		if resp := get(); resp.StatusCode != 200 || resp.Header.Get("X-Shopify-Shop-Api-Call-Limit") != strings.Join([]string{itoa(i), "40"}, "/") {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"))
		}
	}
	if resp := get(); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "0.5" {
		t.Fatalf("the 41st: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clock.Add(500 * time.Millisecond)
	if resp := get(); resp.StatusCode != 200 {
		t.Fatalf("after one leaked: %d", resp.StatusCode)
	}
	if st := s.Stats(); st.REST != 41 || st.REST429 != 1 {
		t.Errorf("stats %+v", st)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
