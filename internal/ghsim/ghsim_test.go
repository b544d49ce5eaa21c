package ghsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// start runs a Server on loopback with cfg, on a hand-moved clock set at
// a whole second.
func start(t *testing.T, cfg Config) (*Server, *httptest.Server, *testclock.Clock) {
	t.Helper()
	clock := testclock.New(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	sim := New(cfg)
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	return sim, api, clock
}

// call sends a request with token ("" for none) and returns the answer
// and its body.
func call(t *testing.T, api *httptest.Server, method, path, token, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, api.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func header(resp *http.Response, name string) int64 {
	n, _ := strconv.ParseInt(resp.Header.Get(name), 10, 64)
	return n
}

// The core window starts with the first request, ends at a whole second
// an hour later, and refuses what is beyond its limit with 403 and
// X-RateLimit-Remaining: 0; the next request after the reset opens a new
// window.
func TestPrimaryWindow(t *testing.T) {
	sim, api, clock := start(t, Config{Core: 3})
	clock.Add(300 * time.Millisecond)
	first := clock.Now()
	for i := 1; i <= 3; i++ {
		resp, _ := call(t, api, "GET", "/repos/o/r", "tok", "")
		if resp.StatusCode != 200 || header(resp, "X-RateLimit-Used") != int64(i) || header(resp, "X-RateLimit-Remaining") != int64(3-i) {
			t.Fatalf("request %d: %s, used %s, remaining %s", i, resp.Status, resp.Header.Get("X-RateLimit-Used"), resp.Header.Get("X-RateLimit-Remaining"))
		}
		if got, want := header(resp, "X-RateLimit-Reset"), first.Add(time.Hour).Truncate(time.Second).Unix(); got != want {
			t.Fatalf("reset %d, want %d (an hour after the first request, at a whole second)", got, want)
		}
		if resp.Header.Get("X-RateLimit-Resource") != "core" || header(resp, "X-RateLimit-Limit") != 3 {
			t.Fatalf("resource %q, limit %s", resp.Header.Get("X-RateLimit-Resource"), resp.Header.Get("X-RateLimit-Limit"))
		}
	}
	resp, body := call(t, api, "GET", "/repos/o/r", "tok", "")
	if resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" || !strings.Contains(body, "API rate limit exceeded for user ID") {
		t.Fatalf("beyond the limit: %s %s remaining %q", resp.Status, body, resp.Header.Get("X-RateLimit-Remaining"))
	}
	if resp, _ := call(t, api, "GET", "/repos/o/r", "another", ""); resp.StatusCode != 200 {
		t.Fatalf("another credential: %s", resp.Status)
	}
	clock.Set(first.Add(time.Hour).Truncate(time.Second))
	if resp, _ := call(t, api, "GET", "/repos/o/r", "tok", ""); resp.StatusCode != 200 || header(resp, "X-RateLimit-Used") != 1 {
		t.Fatalf("after the reset: %s, used %s", resp.Status, resp.Header.Get("X-RateLimit-Used"))
	}
	st := sim.Stats()
	if st.Served != 5 || st.Primary != 1 || st.Secondary != 0 {
		t.Errorf("stats %+v", st)
	}
	var closed []Window
	for _, w := range sim.Windows(Core) {
		if w.Identity == "user-1" {
			closed = append(closed, w)
		}
	}
	if len(closed) != 2 || closed[0].Used != 3 || closed[1].Used != 1 {
		t.Errorf("windows of user-1: %+v", closed)
	}
}

// Requests without credentials share one window of 60; searches have
// their own, a minute long; GET /rate_limit spends none.
func TestResources(t *testing.T) {
	_, api, clock := start(t, Config{Search: 2})
	resp, _ := call(t, api, "GET", "/users/octocat", "", "")
	if header(resp, "X-RateLimit-Limit") != 60 {
		t.Errorf("anonymous limit %s, want 60", resp.Header.Get("X-RateLimit-Limit"))
	}
	for i, want := range []int{200, 200, 403} {
		resp, _ := call(t, api, "GET", "/search/issues?q=bug", "tok", "")
		if resp.StatusCode != want || resp.Header.Get("X-RateLimit-Resource") != "search" {
			t.Errorf("search %d: %s, resource %q; want %d", i, resp.Status, resp.Header.Get("X-RateLimit-Resource"), want)
		}
	}
	if resp, _ := call(t, api, "GET", "/search/code?q=x", "tok", ""); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Resource") != "code_search" || header(resp, "X-RateLimit-Limit") != 10 {
		t.Errorf("code search: %s, resource %q, limit %s", resp.Status, resp.Header.Get("X-RateLimit-Resource"), resp.Header.Get("X-RateLimit-Limit"))
	}
	resp, body := call(t, api, "GET", "/rate_limit", "tok", "")
	if resp.StatusCode != 200 || header(resp, "X-RateLimit-Used") != 0 || !strings.Contains(body, `"search":{"limit":2,"remaining":0,"reset":`) {
		t.Errorf("rate_limit: %s used %s %s", resp.Status, resp.Header.Get("X-RateLimit-Used"), body)
	}
	clock.Add(time.Minute)
	if resp, _ := call(t, api, "GET", "/search/issues?q=bug", "tok", ""); resp.StatusCode != 200 {
		t.Errorf("search a minute later: %s", resp.Status)
	}
}

// REST points slide over a minute: GETs cost 1, POSTs 5; content creation
// has limits of its own; refusals say "secondary rate limit", with
// Retry-After when configured, and with 429 when configured.
func TestSecondaryLimits(t *testing.T) {
	sim, api, clock := start(t, Config{RESTPoints: 12, ContentPerMinute: 1, RetryAfter: true, Status: 429})
	if resp, _ := call(t, api, "POST", "/repos/o/r/issues", "tok", `{"title":"a"}`); resp.StatusCode != 201 {
		t.Fatalf("create: %s", resp.Status)
	}
	clock.Add(10 * time.Second)
	resp, body := call(t, api, "POST", "/repos/o/r/issues", "tok", `{"title":"b"}`)
	if resp.StatusCode != 429 || !strings.Contains(body, "blocked from content creation") || resp.Header.Get("Retry-After") != "50" {
		t.Fatalf("the second creation in a minute: %s %s Retry-After %q", resp.Status, body, resp.Header.Get("Retry-After"))
	}
	for i := range 7 { // 5 + 7 = 12 points
		if resp, _ := call(t, api, "GET", "/repos/o/r", "tok", ""); resp.StatusCode != 200 {
			t.Fatalf("GET %d: %s", i, resp.Status)
		}
	}
	resp, body = call(t, api, "GET", "/repos/o/r", "tok", "")
	if resp.StatusCode != 429 || !strings.Contains(body, "secondary rate limit") || !strings.HasSuffix(jsonField(body, "documentation_url"), "secondary-rate-limits") {
		t.Fatalf("the 13th point: %s %s", resp.Status, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "50" {
		t.Errorf("Retry-After %q, want 50: the POST's points leave the minute then", got)
	}
	clock.Add(50 * time.Second)
	if resp, _ := call(t, api, "GET", "/repos/o/r", "tok", ""); resp.StatusCode != 200 {
		t.Errorf("a minute after the POST: %s", resp.Status)
	}
	if st := sim.Stats(); st.Secondary != 2 || st.Served != 9 {
		t.Errorf("stats %+v", st)
	}
}

func jsonField(body, name string) string {
	var m map[string]any
	json.Unmarshal([]byte(body), &m)
	s, _ := m[name].(string)
	return s
}

// More requests in flight than allowed are refused as a secondary limit;
// the time spent in flight is summed.
func TestInFlight(t *testing.T) {
	release := make(chan struct{})
	sim, api, clock := start(t, Config{InFlight: 2, Latency: func(*http.Request) time.Duration {
		<-release
		return 0
	}})
	var wg sync.WaitGroup
	statuses := make(chan int, 3)
	for range 2 {
		wg.Go(func() {
			resp, _ := call(t, api, "GET", "/repos/o/r", "tok", "")
			statuses <- resp.StatusCode
		})
	}
	for i := 0; sim.Stats().MostInFlight < 2 && i < 1000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	resp, body := call(t, api, "GET", "/repos/o/r", "tok", "")
	if resp.StatusCode != 403 || !strings.Contains(body, "secondary rate limit") {
		t.Errorf("a third request in flight: %s %s", resp.Status, body)
	}
	clock.Add(2 * time.Second)
	close(release)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Errorf("a request in flight within the limit: %d", s)
		}
	}
	if st := sim.Stats(); st.MostInFlight != 3 || st.Secondary != 1 || st.InFlightTime != 4*time.Second {
		t.Errorf("stats %+v", st)
	}
}

// gql sends a GraphQL query and decodes the answer.
func gql(t *testing.T, api *httptest.Server, token, query string) (*http.Response, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"query": query})
	resp, body := call(t, api, "POST", "/graphql", token, string(b))
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return resp, out
}

// GraphQL points follow the documented formula: the page's example costs
// 51; rateLimit answers with it; a query beyond the remaining points is
// answered 200 with RATE_LIMITED.
func TestGraphQLCosts(t *testing.T) {
	sim, api, _ := start(t, Config{GraphQL: 60})
	example := `query { viewer { login repositories(first: 100) { edges { node { id
		issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } }
		rateLimit { cost remaining used limit nodeCount resetAt } }`
	resp, out := gql(t, api, "tok", example)
	rl := out["data"].(map[string]any)["rateLimit"].(map[string]any)
	if rl["cost"] != 51.0 || rl["remaining"] != 9.0 || rl["used"] != 51.0 || rl["limit"] != 60.0 || rl["nodeCount"] != 305100.0 {
		t.Errorf("rateLimit %v", rl)
	}
	if resp.Header.Get("X-RateLimit-Resource") != "graphql" || header(resp, "X-RateLimit-Used") != 51 {
		t.Errorf("headers %v", resp.Header)
	}
	if login := out["data"].(map[string]any)["viewer"].(map[string]any)["login"]; login != "user-1" {
		t.Errorf("viewer.login %v", login)
	}
	resp, out = gql(t, api, "tok", example)
	errs, _ := out["errors"].([]any)
	if resp.StatusCode != 200 || len(errs) != 1 || errs[0].(map[string]any)["type"] != "RATE_LIMITED" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("beyond the points: %s %v remaining %q", resp.Status, out, resp.Header.Get("X-RateLimit-Remaining"))
	}
	// Queries GitHub would not run cost nothing.
	for query, kind := range map[string]string{
		`{ viewer { repositories(first: 101) { nodes { id } } } }`:                                    "EXCESSIVE_PAGINATION",
		`{ a(first: 100) { b(first: 100) { c(first: 100) { id } } } }`:                                "MAX_NODE_LIMIT_EXCEEDED",
		`query($n: Int) { a(first: $n) { id } }`:                                                      "MISSING_PAGINATION_BOUNDARIES",
		`{ viewer { login }`:                                                                          "",
		`mutation { createIssue(input: {title: "t"}) { issue { id } } } query Q { viewer { login } }`: "",
		`fragment F on T { ...F } { a { ...F } }`:                                                     "",
	} {
		resp, out := gql(t, api, "tok", query)
		errs, _ := out["errors"].([]any)
		if resp.StatusCode != 200 || len(errs) != 1 || kind != "" && errs[0].(map[string]any)["type"] != kind || header(resp, "X-RateLimit-Used") != 51 {
			t.Errorf("%s: %s %v used %s, want an error of type %q", query, resp.Status, out, resp.Header.Get("X-RateLimit-Used"), kind)
		}
	}
	if resp, body := call(t, api, "POST", "/graphql", "", `{"query":"{ viewer { login } }"}`); resp.StatusCode != 401 {
		t.Errorf("without credentials: %s %s", resp.Status, body)
	}
	if resp, body := call(t, api, "POST", "/graphql", "tok", `{"query":`); resp.StatusCode != 400 {
		t.Errorf("not JSON: %s %s", resp.Status, body)
	}
	var served int64
	for _, a := range sim.Served() {
		served += a.Units
	}
	if served != 51 {
		t.Errorf("served %d points, want 51", served)
	}
}

// A mutation costs 5 GraphQL points and counts as content.
func TestGraphQLMutation(t *testing.T) {
	sim, api, _ := start(t, Config{GraphQLPoints: 9, ContentPerMinute: 5})
	mutation := `mutation { createIssue(input: {repositoryId: "R", title: "t"}) { issue { number } } }`
	if resp, out := gql(t, api, "tok", mutation); resp.StatusCode != 200 || out["errors"] != nil {
		t.Fatalf("a mutation: %s %v", resp.Status, out)
	}
	if resp, _ := gql(t, api, "tok", mutation); resp.StatusCode != 403 {
		t.Fatalf("a second mutation, 10 points of 9: %s", resp.Status)
	}
	if resp, _ := gql(t, api, "tok", `{ viewer { login } }`); resp.StatusCode != 200 {
		t.Fatalf("a query, 6 points of 9: %s", resp.Status)
	}
	a := sim.Served()
	if len(a) != 2 || !a[0].Content || a[0].Points != 5 || a[1].Content || a[1].Points != 1 {
		t.Errorf("served %+v", a)
	}
}

// Issues come in pages with GitHub's Link header; creation adds one; the
// owner "forbidden" is refused for want of permission, which is no rate
// limit.
func TestIssues(t *testing.T) {
	_, api, _ := start(t, Config{})
	resp, body := call(t, api, "GET", "/repos/o/r/issues?per_page=100&page=3", "tok", "")
	var issues []map[string]any
	json.Unmarshal([]byte(body), &issues)
	if resp.StatusCode != 200 || len(issues) != 50 || !strings.Contains(resp.Header.Get("Link"), `page=2&per_page=100>; rel="prev"`) || strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Errorf("the last page: %s, %d issues, Link %q", resp.Status, len(issues), resp.Header.Get("Link"))
	}
	resp, _ = call(t, api, "GET", "/repos/o/r/issues?per_page=100&page=99999999999999999", "tok", "")
	if resp.StatusCode != 200 {
		t.Errorf("a page far beyond the last: %s", resp.Status)
	}
	if resp, body := call(t, api, "POST", "/repos/o/r/issues", "tok", `{"title":"new"}`); resp.StatusCode != 201 || !strings.Contains(body, `"number":251`) {
		t.Errorf("create: %s %s", resp.Status, body)
	}
	if resp, body := call(t, api, "GET", "/repos/forbidden/r", "tok", ""); resp.StatusCode != 403 || strings.Contains(body, "rate limit") || resp.Header.Get("X-RateLimit-Remaining") == "0" {
		t.Errorf("no permission: %s %s", resp.Status, body)
	}
}

// A GET answer carries an ETag; the same request with If-None-Match
// naming it is answered 304 Not Modified, without a body. Authorized, it
// costs no core unit but keeps its secondary point; anonymous, it costs
// one, as GitHub documents.
func TestConditionalRequests(t *testing.T) {
	for _, token := range []string{"tok", ""} {
		sim, api, _ := start(t, Config{})
		resp, _ := call(t, api, "GET", "/repos/o/r", token, "")
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != 200 || etag == "" {
			t.Fatalf("token %q: a repository: %d, ETag %q; want 200 with an ETag", token, resp.StatusCode, etag)
		}
		conditional := func(tag string) (*http.Response, string) {
			t.Helper()
			req, _ := http.NewRequest("GET", api.URL+"/repos/o/r", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			req.Header.Set("If-None-Match", tag)
			resp, err := api.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp, string(b)
		}
		for range 3 {
			resp, body := conditional(etag)
			if resp.StatusCode != http.StatusNotModified || body != "" || resp.Header.Get("ETag") != etag {
				t.Fatalf("token %q: a conditional request naming the ETag: %d %q, ETag %q; want 304, no body, the same ETag", token, resp.StatusCode, body, resp.Header.Get("ETag"))
			}
		}
		if resp, _ := conditional(`"other"`); resp.StatusCode != 200 {
			t.Errorf("token %q: a conditional request naming another ETag: %d, want 200", token, resp.StatusCode)
		}
		wantUsed := int64(2) // the two 200s
		if token == "" {
			wantUsed = 5
		}
		if w := sim.Windows(Core); len(w) != 1 || w[0].Used != wantUsed {
			t.Errorf("token %q: core windows %+v; want one that used %d", token, w, wantUsed)
		}
		var points int64
		notModified := 0
		for _, a := range sim.Served() {
			points += a.Points
			if a.NotModified {
				notModified++
			}
		}
		if points != 5 || notModified != 3 {
			t.Errorf("token %q: %d secondary points, %d answered Not Modified; want 5 and 3", token, points, notModified)
		}
	}
}
