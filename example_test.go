package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// fakeAPI stands in for the upstream; it answers every request 200, with
// the API key it received in X-Seen-Key.
func fakeAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Key", r.Header.Get("X-Api-Key"))
	}))
}

// searchTable charges a search 100 units of the pool and a list call 1.
func searchTable() *costs.Table {
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	return table
}

// inProcessLimiter is a limiter on an in-process Redis, closed by the
// returned func. A service shares its quota by giving quota.New a client
// of one Redis in every process instead.
func inProcessLimiter() (*quota.Limiter, func()) {
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	lim, err := quota.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return lim, func() { rdb.Close() }
}

func Example() {
	api := fakeAPI()
	defer api.Close()

	// Share the quota through Redis: quota.New(redis.NewClient(...)) in
	// every process. embedded.New runs an in-process Redis instead.
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   table,
		Buckets: map[string]tollgate.Bucket{
			// The upstream allows 260 units an hour; keep 10 in reserve.
			"pool": {Limits: []quota.Limit{quota.PerWindow(260, time.Hour)}, ReserveUnits: 10},
		},
		Scope:  tollgate.Scope("project-a"),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	if err != nil {
		log.Fatal(err) // the configuration cannot work: errors.Is(err, tollgate.ErrConfig)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	for range 3 {
		resp, err := client.Get(api.URL + "/v1/search?q=tollgate")
		var qe *tollgate.QuotaError
		switch {
		case errors.As(err, &qe):
			fmt.Printf("refused: %d units of %q, retry in about %v\n", qe.Units, qe.Bucket, qe.RetryAfter.Round(time.Hour))
		case err != nil:
			log.Fatal(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.Status)
		}
	}
	// Output:
	// 200 OK
	// 200 OK
	// refused: 100 units of "pool", retry in about 1h0m0s
}

// While Redis is down, let cheap calls through unmetered but stop the
// expensive ones, which could drain the quota unseen.
func ExampleConfig_policy() {
	api := fakeAPI()
	defer api.Close()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1, MaxRetries: -1}) // nothing listens here
	defer down.Close()
	lim, err := quota.New(down)
	if err != nil {
		log.Fatal(err)
	}

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10000, 24*time.Hour)}}},
		Policy: func(e costs.Endpoint) tollgate.Policy {
			if e.Units() >= 100 {
				return tollgate.Policy{OnOutage: tollgate.FailClosed}
			}
			return tollgate.Policy{OnOutage: tollgate.FailOpen}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	resp, err := client.Get(api.URL + "/v1/items")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("items.list:", resp.Status)
	_, err = client.Get(api.URL + "/v1/search")
	fmt.Println("search: unavailable:", errors.Is(err, tollgate.ErrUnavailable))
	// Output:
	// items.list: 200 OK
	// search: unavailable: true
}

// Each API key has a quota of its own: the scope is a hash of the key, so
// the key itself never reaches Redis, the Trace, logs or errors.
func ExampleCredentialScope() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}},
		Scope:   tollgate.CredentialScope(func(r *http.Request) string { return r.Header.Get("X-Api-Key") }),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			fmt.Printf("%s in %s…: admitted %v\n", d.Endpoint, d.Scope[:9], d.Admitted)
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()

	for _, key := range []string{"token-of-alice", "token-of-alice", "token-of-bob"} {
		req, _ := http.NewRequest("GET", api.URL+"/v1/search", nil)
		req.Header.Set("X-Api-Key", key)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	// Output:
	// search in cred-19c2…: admitted true
	// search in cred-19c2…: admitted false
	// search in cred-8004…: admitted true
}

// When project-a's quota is spent, fail over to project-b with its own API
// key, then wait for project-a's turn once both are spent.
func ExampleRoute() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}},
		Scope:   tollgate.Scope("project-a"),
		Policy: tollgate.Policies(tollgate.Policy{
			OnRefusal: tollgate.Failover, AfterFailover: tollgate.Refuse,
		}, nil),
		Routes: []tollgate.Route{{
			Name:    "project-b",
			Scope:   "project-b",
			Rewrite: func(req *http.Request) { req.Header.Set("X-Api-Key", "key-of-project-b") },
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()

	for range 3 {
		req, _ := http.NewRequest("GET", api.URL+"/v1/search", nil)
		req.Header.Set("X-Api-Key", "key-of-project-a")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println("refused:", errors.Is(err, tollgate.ErrQuotaExhausted))
			continue
		}
		resp.Body.Close()
		fmt.Println("sent with", resp.Header.Get("X-Seen-Key"))
	}
	// Output:
	// sent with key-of-project-a
	// sent with key-of-project-b
	// refused: true
}

// A hot scope spends from leases: this process takes 50 units in one
// decision and spends them call by call without a round trip.
func ExampleConfig_lease() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	leased := 0
	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1000, time.Minute)}}},
		Lease: func(scope, bucket string) (int64, time.Duration) {
			return 50, 2 * time.Second // blocks of 50 units, each spent within 2s
		},
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			if d.Leased {
				leased++
			}
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	for range 120 {
		resp, err := client.Get(api.URL + "/v1/items")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	// "default" is the scope of a Config without a Scope.
	usage, err := tr.Usage(context.Background(), "default", "pool")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leased:", leased, "of 120; counted in Redis:", usage[0].Used)
	// Close gives back what the last lease did not spend.
	if err := tr.Close(); err != nil {
		log.Fatal(err)
	}
	usage, err = tr.Usage(context.Background(), "default", "pool")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Close:", usage[0].Used)
	// Output:
	// leased: 120 of 120; counted in Redis: 150
	// after Close: 120
}

// An upstream that says its quota is spent its own way: a 200 whose JSON
// body reads {"error":"quota_exhausted","retry_in":30}. The reader pauses
// the whole scope for every process, and the caller gets a *QuotaError.
func ExampleUpstreamFunc() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"error":"quota_exhausted","retry_in":30}`)
	}))
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	read := func(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
		if v := tollgate.DefaultUpstream(resp, e); v.Spent {
			return v // a 429, read as usual
		}
		head, _ := tollgate.PeekBody(resp, 512) // the caller still reads the whole body
		if !strings.Contains(string(head), `"quota_exhausted"`) {
			return tollgate.Verdict{}
		}
		return tollgate.Verdict{Spent: true, Pause: 30 * time.Second}
	}
	tr, err := tollgate.New(tollgate.Config{
		Limiter:      lim,
		Costs:        searchTable(),
		Buckets:      map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1000, time.Hour)}}},
		Policy:       tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		ReadResponse: read,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()

	for range 2 {
		req, _ := http.NewRequest("GET", api.URL+"/v1/items", nil)
		_, err := tr.RoundTrip(req)
		var qe *tollgate.QuotaError
		if errors.As(err, &qe) {
			fmt.Printf("%v, retry in %v\n", qe.Cause, qe.RetryAfter.Round(time.Second))
		}
	}
	// Output:
	// the upstream's pause, retry in 30s
	// the upstream's pause, retry in 30s
}

// The Trace's Decided sees every request's decision: for metrics, or to
// tell who waits.
func ExampleConfig_trace() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(150, time.Hour)}}},
		Scope:   tollgate.Scope("project-a"),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			if d.Admitted {
				fmt.Printf("%s: admitted, %v\n", d.Endpoint, d.Charges)
			} else {
				fmt.Printf("%s: refused, retry in about %v\n", d.Endpoint, d.RetryAfter.Round(time.Hour))
			}
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for _, path := range []string{"/v1/search", "/v1/items", "/v1/search"} {
		if resp, err := client.Get(api.URL + path); err == nil {
			resp.Body.Close()
		}
	}
	// Output:
	// search: admitted, [{pool 100}]
	// items.list: admitted, [{pool 1}]
	// search: refused, retry in about 1h0m0s
}

// Observers each bring their own Trace, and Merge stacks them: each sees
// every event, the first's function called before the second's.
func ExampleTrace_Merge() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	admitted := 0
	counting := tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
		if d.Admitted {
			admitted++
		}
	}}
	printing := tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
		fmt.Printf("%s: admitted %v, %d so far\n", d.Endpoint, d.Admitted, admitted)
	}}
	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(150, time.Hour)}}},
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:   counting.Merge(printing),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for _, path := range []string{"/v1/search", "/v1/items", "/v1/search"} {
		if resp, err := client.Get(api.URL + path); err == nil {
			resp.Body.Close()
		}
	}
	// Output:
	// search: admitted true, 1 so far
	// items.list: admitted true, 2 so far
	// search: admitted false, 2 so far
}

// A service that calls the upstream for its own callers passes a refusal
// on as a 429 with Retry-After.
func ExampleQuotaError_ServeHTTP() {
	refused := &tollgate.QuotaError{Endpoint: "search", Scope: "project-a", Units: 100, RetryAfter: 41200 * time.Millisecond}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error = refused // what the upstream call returned
		var qe *tollgate.QuotaError
		if errors.As(err, &qe) {
			qe.ServeHTTP(w, r)
			return
		}
	})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/search?q=go", nil))
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	fmt.Print(rec.Body.String())
	// Output:
	// 429 42
	// quota exhausted; retry after 42 seconds
}

// Usage reads what the Transport counts, with its reserve: for a status
// page or a metrics gauge.
func ExampleTransport_Usage() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10000, 24*time.Hour)}, ReservePercent: 5}},
		Transit: -1,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	resp, err := (&http.Client{Transport: tr}).Get(api.URL + "/v1/search")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	usage, err := tr.Usage(context.Background(), "default", "pool")
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range usage {
		fmt.Printf("%v: used %d, remaining %d\n", u.Limit, u.Used, u.Remaining)
	}
	// Output:
	// 9500/24h0m0s: used 100, remaining 9400
}

// A bucket that follows the quota its upstream announces: its limit is
// learned from the first response (0 units until then), and what the
// upstream counts beyond tollgate's count (here 1,000 of 5,000 spent by
// others with the same credential, and the first call, which went out
// before any limit was known) counts for every process until the reset.
func ExampleBucket_announced() {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "3999") // 1,000 spent elsewhere, and this call
		w.Header().Set("X-RateLimit-Reset", fmt.Sprint(reset.Unix()))
		w.Header().Set("X-RateLimit-Resource", "core")
	}))
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {
			Limits:  []quota.Limit{quota.PerFixedWindow(0, time.Hour, time.Time{})},
			Follows: "github/core",
		}},
		Transit: -1,
		Trace: tollgate.Trace{Reconciled: func(_ context.Context, r tollgate.Reconciliation) {
			fmt.Printf("announced %d of %d left; %d spent elsewhere\n", r.Announced.Remaining, r.Announced.Limit, r.Outside)
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	resp, err := (&http.Client{Transport: tr}).Get(api.URL + "/v1/items")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	usage, err := tr.Usage(context.Background(), "default", "pool")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("limit %d, used %d\n", usage[0].Limit.Units, usage[0].Used)
	// Output:
	// announced 3999 of 5000 left; 1001 spent elsewhere
	// limit 5000, used 1001
}

// Shadow mode, a dry run before enforcing: every request is sent, and the
// ones the quota has no room for are reported instead of refused; their
// units count all the same.
func ExamplePolicy_shadow() {
	api := fakeAPI()
	defer api.Close()
	lim, closeRedis := inProcessLimiter()
	defer closeRedis()

	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim,
		Costs:   searchTable(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(150, time.Hour)}}},
		Scope:   tollgate.Scope("project-a"),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Shadow}, nil),
		Trace: tollgate.Trace{WouldRefuse: func(_ context.Context, d tollgate.Decision) {
			var qe *tollgate.QuotaError
			errors.As(d.Err, &qe)
			fmt.Printf("%s: would have refused (%s), sent anyway\n", d.Endpoint, qe.Cause)
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for _, path := range []string{"/v1/search", "/v1/search", "/v1/items"} {
		if resp, err := client.Get(api.URL + path); err == nil {
			fmt.Println(path, resp.Status)
			resp.Body.Close()
		}
	}
	used, _ := tr.Usage(context.Background(), "project-a", "pool")
	fmt.Println("counted:", used[0].Used, "of", used[0].Limit.Units)
	// Output:
	// /v1/search 200 OK
	// search: would have refused (no room), sent anyway
	// /v1/search 200 OK
	// items.list: would have refused (no room), sent anyway
	// /v1/items 200 OK
	// counted: 201 of 150
}
