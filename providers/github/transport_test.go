package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ghsim"
	"github.com/tollgate/tollgate/internal/redistest"
)

// rig is a simulated GitHub and the Redis that Transports share, as
// processes would.
type rig struct {
	sim *ghsim.Server
	api *httptest.Server
	rdb redis.UniversalClient
}

func newRig(t *testing.T, cfg ghsim.Config) *rig {
	t.Helper()
	sim := ghsim.New(cfg)
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	return &rig{sim: sim, api: api, rdb: redistest.Start(t).Client(t)}
}

// transport is one process's Transport. Unless opts sets a policy, it
// fails fast, so that a refusal shows at once.
func (r *rig) transport(t *testing.T, opts Options) *Transport {
	t.Helper()
	if opts.Tollgate.Policy == nil {
		opts.Tollgate.Policy = tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)
	}
	tr, err := NewTransport(r.rdb, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// send sends a request through rt (the simulator's own client when nil),
// reads its body whole and returns its status, or the error.
func (r *rig) send(rt http.RoundTripper, method, path, token, body string) (int, error) {
	if rt == nil {
		rt = r.api.Client().Transport
	}
	var b io.Reader
	if body != "" {
		b = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.api.URL+path, b)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// upstreamRefusal reports whether err is a refusal the upstream made.
func upstreamRefusal(err error) (*tollgate.QuotaError, bool) {
	var qe *tollgate.QuotaError
	return qe, errors.As(err, &qe) && qe.Cause == tollgate.PausedByUpstream
}

func TestNewTransportRefuses(t *testing.T) {
	for name, opts := range map[string]Options{
		"Tollgate.Base":      {Tollgate: tollgate.Config{Base: http.DefaultTransport}},
		"Tollgate.Scope":     {Tollgate: tollgate.Config{Scope: tollgate.Scope("x")}},
		"Tollgate.Upstream":  {Tollgate: tollgate.Config{ReadResponse: tollgate.DefaultUpstream}},
		"Tollgate.Buckets":   {Tollgate: tollgate.Config{Buckets: map[string]tollgate.Bucket{}}},
		"negative reserve":   {ReserveUnits: -1},
		"negative minute":    {Minute: -time.Second},
		"a bucket undefined": {Buckets: map[string]tollgate.Bucket{Core: {}}},
		"a reserve of all":   {ReservePercent: 100},
	} {
		if tr, err := NewTransport(nil, &opts); err == nil {
			tr.Close()
			t.Errorf("%s: NewTransport succeeded", name)
		}
	}
	tr, err := NewTransport(nil, nil)
	if err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Requests without credentials share AnonymousScope at 60 an hour, less
// the reserve, before GitHub says anything: the 58th is refused by
// tollgate, and GitHub refuses none.
func TestAnonymousScope(t *testing.T) {
	r := newRig(t, ghsim.Config{})
	tr := r.transport(t, Options{})
	for i := range 57 {
		if status, err := r.send(tr, "GET", "/repos/o/r", "", ""); err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
	}
	_, err := r.send(tr, "GET", "/repos/o/r", "", "")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.NoRoom || qe.Scope != AnonymousScope || qe.Bucket != Core {
		t.Fatalf("the 58th: %v, want tollgate's refusal in the anonymous scope's core", err)
	}
	usage, err := tr.Usage(context.Background(), AnonymousScope, Core)
	if err != nil || usage[0].Used != 57 || usage[0].Limit.Units != 57 {
		t.Errorf("usage %+v %v", usage, err)
	}
	if st := r.sim.Stats(); st.Primary+st.Secondary != 0 || st.Served != 57 {
		t.Errorf("the simulator: %+v", st)
	}
}

// GitHub's 403 for a primary limit (here: another program spent the
// credential's hour) pauses the resource for every process until the
// reset: a second Transport on the same Redis refuses without asking
// GitHub, and other resources go on.
func TestPrimaryRefusalPausesTheResource(t *testing.T) {
	r := newRig(t, ghsim.Config{Core: 20})
	one, two := r.transport(t, Options{}), r.transport(t, Options{})
	if status, _ := r.send(one, "GET", "/repos/o/r", "tok", ""); status != 200 {
		t.Fatalf("first request: %d", status)
	}
	for range 19 { // another program, without tollgate
		r.send(nil, "GET", "/repos/o/r", "tok", "")
	}
	_, err := r.send(one, "GET", "/repos/o/r", "tok", "")
	qe, ok := upstreamRefusal(err)
	if !ok || qe.Bucket != Core || qe.RetryAfter <= 0 || qe.RetryAfter > time.Hour {
		t.Fatalf("after the hour was spent elsewhere: %v", err)
	}
	served := r.sim.Stats().Served
	if _, err := r.send(two, "GET", "/users/octocat", "tok", ""); err == nil {
		t.Fatalf("another process sent a core request in the pause")
	} else if qe, ok := upstreamRefusal(err); !ok || qe.Bucket != Core {
		t.Fatalf("another process: %v, want the upstream's pause of core", err)
	}
	if status, err := r.send(two, "GET", "/search/issues?q=x", "tok", ""); status != 200 || err != nil {
		t.Errorf("a search in core's pause: %d %v", status, err)
	}
	if status, err := r.send(two, "GET", "/repos/o/r", "other", ""); status != 200 || err != nil {
		t.Errorf("another credential: %d %v", status, err)
	}
	if got := r.sim.Stats().Served; got != served+2 {
		t.Errorf("the simulator served %d during the pause, want the search and the other credential's request only", got-served)
	}
}

// GitHub's 403 for a secondary limit pauses the whole credential, search
// included, for every process; other credentials go on.
func TestSecondaryRefusalPausesTheCredential(t *testing.T) {
	r := newRig(t, ghsim.Config{RESTPoints: 10, RetryAfter: true})
	one, two := r.transport(t, Options{}), r.transport(t, Options{})
	r.send(nil, "POST", "/repos/o/r/issues", "tok", `{"title":"a"}`) // 5 points, elsewhere
	r.send(nil, "POST", "/repos/o/r/issues", "tok", `{"title":"b"}`) // 10
	_, err := r.send(one, "GET", "/repos/o/r", "tok", "")
	qe, ok := upstreamRefusal(err)
	if !ok || qe.Bucket != "" || qe.RetryAfter < 50*time.Second {
		t.Fatalf("a secondary refusal: %v, want the credential paused for its Retry-After", err)
	}
	if _, err := r.send(two, "GET", "/search/issues?q=x", "tok", ""); err == nil {
		t.Errorf("another process searched in the credential's pause")
	}
	if status, err := r.send(two, "GET", "/repos/o/r", "other", ""); status != 200 || err != nil {
		t.Errorf("another credential: %d %v", status, err)
	}
	if st := r.sim.Stats(); st.Secondary != 1 {
		t.Errorf("the simulator refused %d, want the one request that met the limit", st.Secondary)
	}
}

// A 403 for want of permission is an ordinary answer: nothing pauses.
func TestPermissionIsNotQuota(t *testing.T) {
	r := newRig(t, ghsim.Config{})
	tr := r.transport(t, Options{})
	if status, err := r.send(tr, "GET", "/repos/forbidden/r", "tok", ""); status != 403 || err != nil {
		t.Fatalf("no permission: %d %v, want the 403 itself", status, err)
	}
	if status, err := r.send(tr, "GET", "/repos/o/r", "tok", ""); status != 200 || err != nil {
		t.Errorf("the next request: %d %v", status, err)
	}
}

// graphQLBody is a GraphQL request's body.
func graphQLBody(query string) string {
	b, _ := json.Marshal(map[string]string{"query": query})
	return string(b)
}

// A GraphQL query is charged its estimate (the page's example: 52, rounded
// up) and settled to the cost its answer tells (51, as GitHub rounds),
// even when the caller's decoder stops at the end of the JSON value and
// when the body cannot be read twice; a query that does not ask for its
// cost keeps its estimate.
func TestGraphQLSettles(t *testing.T) {
	r := newRig(t, ghsim.Config{})
	tr := r.transport(t, Options{})
	client := &http.Client{Transport: tr}
	send := func(query string) {
		t.Helper()
		req, _ := http.NewRequest("POST", r.api.URL+"/graphql", io.NopCloser(strings.NewReader(graphQLBody(query))))
		req.Header.Set("Authorization", "token tok")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Errors []any }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Errors != nil {
			t.Fatalf("answer %v %v", out.Errors, err)
		}
		resp.Body.Close()
	}
	used := func() int64 {
		t.Helper()
		req, _ := http.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "Bearer tok")
		u, err := tr.Usage(context.Background(), scopeOf(req), GraphQL)
		if err != nil {
			t.Fatal(err)
		}
		return u[0].Used
	}
	send(docExample)
	if got := used(); got != 52 {
		t.Errorf("a query without rateLimit { cost } counts %d, want its estimate, 52", got)
	}
	send(strings.TrimSuffix(docExample, "}") + ` rateLimit { cost } }`)
	if got := used(); got != 52+51 {
		t.Errorf("with rateLimit { cost }: %d counted, want 52 + 51", got)
	}
	var sim int64
	for _, a := range r.sim.Served() {
		sim += a.Units
	}
	if sim != 102 {
		t.Errorf("the simulator charged %d points, want 102", sim)
	}
}

// GraphQL's primary refusal comes as a 200 whose errors say RATE_LIMITED:
// the graphql bucket pauses until the reset; REST goes on.
func TestGraphQLRateLimited(t *testing.T) {
	r := newRig(t, ghsim.Config{GraphQL: 60})
	tr := r.transport(t, Options{})
	r.send(nil, "POST", "/graphql", "tok", graphQLBody(docExample)) // 51 points, elsewhere
	_, err := r.send(tr, "POST", "/graphql", "tok", graphQLBody(docExample))
	qe, ok := upstreamRefusal(err)
	if !ok || qe.Bucket != GraphQL {
		t.Fatalf("a query beyond the hour's points: %v, want the upstream's pause of graphql", err)
	}
	if _, err := r.send(tr, "POST", "/graphql", "tok", graphQLBody(`{ viewer { login } }`)); err == nil {
		t.Errorf("a query was sent in graphql's pause")
	}
	if status, err := r.send(tr, "GET", "/repos/o/r", "tok", ""); status != 200 || err != nil {
		t.Errorf("REST in graphql's pause: %d %v", status, err)
	}
}

// No credential reaches Redis: neither keys nor values hold the token,
// and neither do errors.
func TestCredentialsStayOut(t *testing.T) {
	const secret = "ghp_s3cr3tT0kenThatMustNeverLeak000000"
	r := newRig(t, ghsim.Config{Core: 3})
	tr := r.transport(t, Options{})
	var errs []string
	for range 6 {
		if _, err := r.send(tr, "GET", "/repos/o/r", secret, ""); err != nil {
			errs = append(errs, err.Error())
		}
		if _, err := r.send(tr, "POST", "/graphql", secret, `{"query": "{"}`); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		t.Fatal("no request failed: the test shows nothing of errors")
	}
	ctx := context.Background()
	keys, err := r.rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	for _, k := range keys {
		dump, _ := r.rdb.Dump(ctx, k).Result()
		if strings.Contains(k, secret) || strings.Contains(dump, secret) || strings.Contains(k, secret[4:20]) {
			t.Errorf("Redis key %q holds the token", k)
		}
	}
	for _, e := range append(errs, fmt.Sprintf("%v %+v %#v", tr, tr, tr)) {
		if strings.Contains(e, secret) {
			t.Errorf("%q shows the token", e)
		}
	}
}

// The cap on requests in flight holds across processes: three Transports
// on one Redis, with a cap of 4 (Options.Buckets), never have more than 4
// at GitHub at once, and GitHub refuses none.
func TestInFlightAcrossProcesses(t *testing.T) {
	r := newRig(t, ghsim.Config{InFlight: 4, Latency: func(*http.Request) time.Duration { return 20 * time.Millisecond }})
	capped := (&Options{}).buckets(false)[Concurrent]
	capped.MaxInFlight = 4
	var wg sync.WaitGroup
	var failed sync.Map
	for p := range 3 {
		tr := r.transport(t, Options{
			Buckets:  map[string]tollgate.Bucket{Concurrent: capped},
			Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{}, nil)}, // waits for a slot
		})
		for g := range 4 {
			wg.Go(func() {
				for i := range 5 {
					if _, err := r.send(tr, "GET", "/repos/o/r", "tok", ""); err != nil {
						failed.Store(fmt.Sprint(p, g, i), err)
					}
				}
			})
		}
	}
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Errorf("request %v: %v", k, v)
		return true
	})
	st := r.sim.Stats()
	if st.Secondary != 0 || st.MostInFlight > 4 || st.MostInFlight < 2 || st.Served != 60 {
		t.Errorf("the simulator: %+v; want 60 served, at most 4 in flight and no refusal", st)
	}
}

// A conditional request answered 304 Not Modified costs no core unit when
// it carries a credential, as GitHub documents: a credential polling with
// its ETag keeps its hour (here 20 requests, which 40 polls would spend
// twice over), and still spends secondary points. Without a credential,
// GitHub counts the 304s, and so does tollgate.
func TestConditionalRequestsKeepTheHour(t *testing.T) {
	r := newRig(t, ghsim.Config{Core: 20, AnonymousCore: 20})
	tr := r.transport(t, Options{})
	get := func(token, etag string) (*http.Response, error) {
		t.Helper()
		req, _ := http.NewRequest("GET", r.api.URL+"/repos/o/r", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	ctx := context.Background()
	for _, c := range []struct {
		token, scope string
		polls        int
		wantCore     int64
	}{
		{"tok", tollgate.HashCredential("tok"), 40, 1},
		{"", AnonymousScope, 5, 6},
	} {
		resp, err := get(c.token, "")
		if err != nil || resp.Header.Get("ETag") == "" {
			t.Fatalf("token %q: the first request: %v (ETag %q)", c.token, err, resp.Header.Get("ETag"))
		}
		etag := resp.Header.Get("ETag")
		for i := range c.polls {
			resp, err := get(c.token, etag)
			if err != nil {
				t.Fatalf("token %q: poll %d: %v", c.token, i, err)
			}
			if resp.StatusCode != http.StatusNotModified {
				t.Fatalf("token %q: poll %d: %d, want 304", c.token, i, resp.StatusCode)
			}
		}
		core, err := tr.Usage(ctx, c.scope, Core)
		if err != nil {
			t.Fatal(err)
		}
		points, err := tr.Usage(ctx, c.scope, RESTPoints)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := points[0].Used, int64(c.polls+1); core[0].Used != c.wantCore || got != want {
			t.Errorf("token %q: core counts %d, secondary points %d; want %d and %d", c.token, core[0].Used, got, c.wantCore, want)
		}
	}
	if st := r.sim.Stats(); st.Primary+st.Secondary != 0 {
		t.Errorf("GitHub refused requests: %+v", st)
	}
}
