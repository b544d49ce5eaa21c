package tollgateotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/extra/tollgateotel"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

const (
	requests = "tollgate.rate_limiting.requests"
	charged  = "tollgate.rate_limiting.units.charged"
)

// TestRequestsByResult: each way a decision ends is counted under its
// result, by endpoint, and the units admitted requests spend by bucket.
func TestRequestsByResult(t *testing.T) {
	r := newRig(t, tollgate.Config{
		Buckets: testBuckets(3, time.Hour),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Lease: func(scope, bucket string) (int64, time.Duration) {
			if bucket == "tokens" {
				return 5000, time.Minute
			}
			return 0, 0
		},
	})
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.get(t, cancelled, "/v1/items"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with a cancelled context: %v", err)
	}
	for range 3 {
		if err := r.get(t, ctx, "/v1/items"); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // refused by Redis, then from this process's memory of it
		if err := r.get(t, ctx, "/v1/items"); !errors.Is(err, tollgate.ErrQuotaExhausted) {
			t.Fatalf("4th call: %v, want refused", err)
		}
	}
	if err := r.get(t, ctx, "/v1/ping"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.get(t, ctx, "/v1/stats"); err != nil {
			t.Fatal(err)
		}
	}
	want(t, r.points(t), map[string]float64{
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}":  3,
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=refused}":   1,
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=cached}":    1,
		requests + "{tollgate.endpoint=ping,tollgate.rate_limiting.result=free}":            1,
		requests + "{tollgate.endpoint=stats,tollgate.rate_limiting.result=leased}":         2,
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=cancelled}": 1,
		charged + "{tollgate.bucket=pool,tollgate.endpoint=items.list}":                     3,
		charged + "{tollgate.bucket=tokens,tollgate.endpoint=stats}":                        20,
	})
}

// TestOutage: while Redis is down, requests are counted under the outage
// mode that decided them, the switches are counted, the availability
// gauge reads 0 until Redis answers again, and the quota gauges give no
// point rather than a stale one.
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	lim, err := quota.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, tollgate.Config{
		Limiter: lim, Buckets: testBuckets(1000, time.Hour),
		Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailClosed}, map[string]tollgate.Policy{
			"search.list": {OnOutage: tollgate.FailOpen},
			"report":      {OnOutage: tollgate.FailLocal},
		}),
		LocalLimiter: inProcess(t), LocalShare: 0.5,
	})
	ctx := context.Background()
	if err := r.get(t, ctx, "/v1/items"); err != nil {
		t.Fatal(err)
	}
	remaining := "tollgate.quota.remaining{tollgate.bucket=pool,tollgate.window=1h0m0.05s}"
	if p := r.points(t); p[remaining] != 999 {
		t.Fatalf("before the outage: %s = %v, want 999", remaining, p[remaining])
	}
	srv.Kill()
	if err := r.get(t, ctx, "/v1/items"); !errors.Is(err, tollgate.ErrUnavailable) {
		t.Fatalf("items.list with Redis down: %v, want unavailable", err)
	}
	for _, path := range []string{"/v1/search", "/v1/report"} {
		if err := r.get(t, ctx, path); err != nil {
			t.Fatalf("%s with Redis down: %v", path, err)
		}
	}
	p := r.points(t)
	if v, ok := p[remaining]; ok {
		t.Errorf("with Redis down, %s = %v: want no point rather than a stale one", remaining, v)
	}
	want(t, p, map[string]float64{
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}":    1,
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=unavailable}": 1,
		requests + "{tollgate.endpoint=search.list,tollgate.rate_limiting.result=unmetered}":  1,
		requests + "{tollgate.endpoint=report,tollgate.rate_limiting.result=local}":           1,
		charged + "{tollgate.bucket=pool,tollgate.endpoint=search.list}":                      100,
		"tollgate.redis.switches{tollgate.redis.state=down}":                                  1,
		"tollgate.redis.available{}": 0,
	})

	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.get(t, ctx, "/v1/items") // one request every probe interval asks Redis again
		if p := r.points(t); p["tollgate.redis.available{}"] == 1 {
			want(t, p, map[string]float64{"tollgate.redis.switches{tollgate.redis.state=up}": 1})
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the availability gauge still reads 0 5s after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWaitingRequests: a request waiting for its turn is counted as queued
// until its turn comes, then its wait is recorded, as is the wait of a
// caller that gave up.
func TestWaitingRequests(t *testing.T) {
	lim := inProcess(t)
	window := 400 * time.Millisecond
	r := newRig(t, tollgate.Config{Limiter: lim, Buckets: testBuckets(2, window), Transit: -1,
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: time.Minute}, nil)})
	ctx := context.Background()
	for range 2 {
		if err := r.get(t, ctx, "/v1/items"); err != nil {
			t.Fatal(err)
		}
	}
	queued := "tollgate.rate_limiting.queued_requests{tollgate.endpoint=items.list}"
	done := make(chan error, 1)
	go func() { done <- r.get(t, ctx, "/v1/items") }()
	for deadline := time.Now().Add(window / 2); ; {
		if r.points(t)[queued] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request counted as queued within %v:\n%s", window/2, dump(r.points(t)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.get(t, ctx, "/v1/items"); err != nil { // the window is full again
		t.Fatal(err)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := r.get(t, gaveUp, "/v1/items"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller giving up: %v", err)
	}
	p := r.points(t)
	inQueue := "tollgate.rate_limiting.request.time_in_queue"
	want(t, p, map[string]float64{
		queued: 0,
		inQueue + "_count{tollgate.endpoint=items.list,tollgate.rate_limiting.result=cancelled}": 1,
	})
	// The request that filled the window again may have waited too, for
	// the instant between the two it followed.
	admitted := "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}"
	if n, s := p[inQueue+"_count"+admitted], p[inQueue+"_sum"+admitted]; n < 1 || n > 2 || s < 0.1 || s > 2*window.Seconds() {
		t.Errorf("admitted after waiting: %v requests, %vs in all; want 1 or 2, most of a %v window", n, s, window)
	}
}

// TestSlotsInFlight: a request holds its cap's slot while its body is
// open.
func TestSlotsInFlight(t *testing.T) {
	b := testBuckets(1000, time.Hour)
	b["search"] = tollgate.Bucket{Limits: b["search"].Limits, MaxInFlight: 3}
	r := newRig(t, tollgate.Config{Buckets: b})
	req, _ := http.NewRequest("GET", r.up.URL+"/v1/search", nil)
	resp, err := r.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	active := "tollgate.rate_limiting.active_request_leases{tollgate.bucket=search}"
	want(t, r.points(t), map[string]float64{active: 1})
	resp.Body.Close()
	want(t, r.points(t), map[string]float64{active: 0})
}

// TestSettledUnits: a true cost below its estimate counts the difference
// as refunded, one above it as charged.
func TestSettledUnits(t *testing.T) {
	r := newRig(t, tollgate.Config{Buckets: testBuckets(1000, time.Hour)})
	for _, cost := range []string{"220", "1500", "not a number"} {
		r.setRespond(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Cost", cost) })
		if err := r.get(t, context.Background(), "/v1/report"); err != nil {
			t.Fatal(err)
		}
	}
	want(t, r.points(t), map[string]float64{
		charged + "{tollgate.bucket=tokens,tollgate.endpoint=report}":                                              3000 + 500,
		"tollgate.rate_limiting.units.refunded{tollgate.bucket=tokens,tollgate.endpoint=report}":                   780,
		"tollgate.rate_limiting.settlements{tollgate.endpoint=report,tollgate.rate_limiting.result=settled}":       2,
		"tollgate.rate_limiting.settlements{tollgate.endpoint=report,tollgate.rate_limiting.result=estimate_kept}": 1,
	})
}

// TestUpstreamPauses: a 429 pauses the scope (its status is the reason);
// a reader's own verdict names its reason and buckets.
func TestUpstreamPauses(t *testing.T) {
	r := newRig(t, tollgate.Config{
		Buckets: testBuckets(1000, time.Hour),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		ReadResponse: func(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
			if resp.StatusCode == http.StatusForbidden {
				return tollgate.Verdict{Spent: true, Buckets: []string{"pool", "search"}, Pause: time.Minute, Reason: "quotaExceeded"}
			}
			return tollgate.DefaultUpstream(resp, e)
		},
	})
	r.setRespond(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/search") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusTooManyRequests)
	})
	for _, path := range []string{"/v1/search", "/v1/report"} {
		if err := r.get(t, context.Background(), path); !errors.Is(err, tollgate.ErrQuotaExhausted) {
			t.Fatalf("%s: %v, want the upstream's refusal", path, err)
		}
	}
	want(t, r.points(t), map[string]float64{
		"tollgate.upstream.pauses{tollgate.bucket=pool,tollgate.pause.reason=quotaExceeded}":   1,
		"tollgate.upstream.pauses{tollgate.bucket=search,tollgate.pause.reason=quotaExceeded}": 1,
		"tollgate.upstream.pauses{tollgate.pause.reason=429}":                                  1,
	})
}

// countingReader counts the usage reads of a Transport.
type countingReader struct {
	tollgateotel.UsageReader
	reads int
}

func (c *countingReader) Usage(ctx context.Context, scope, bucket string) ([]quota.Usage, error) {
	c.reads++ // the reads of one collection run on its goroutine
	return c.UsageReader.Usage(ctx, scope, bucket)
}

// TestQuotaGauges: the gauges read each scope bucket seen once per
// collection, however many requests there were; without WithScopes they
// give the scope with the fewest units left, with it every scope.
func TestQuotaGauges(t *testing.T) {
	scopeOf := func(req *http.Request) (string, error) { return req.URL.Query().Get("team"), nil }
	for _, scoped := range []bool{false, true} {
		var opts []tollgateotel.Option
		if scoped {
			opts = append(opts, tollgateotel.WithScopes())
		}
		r := newRig(t, tollgate.Config{Buckets: testBuckets(1000, time.Hour), Transit: -1, Scope: scopeOf}, opts...)
		reader := &countingReader{UsageReader: r.tr}
		r.metrics.Observe(reader)
		for i := range 30 {
			team := "a"
			if i%3 == 0 {
				team = "b"
			}
			if err := r.get(t, context.Background(), "/v1/items?team="+team); err != nil {
				t.Fatal(err)
			}
		}
		p := r.points(t)
		if reader.reads != 2 {
			t.Errorf("scoped %v: %d usage reads for one collection, want 2 (two scopes, one bucket)", scoped, reader.reads)
		}
		left, limit := "tollgate.quota.remaining", "tollgate.quota.limit"
		if scoped {
			want(t, p, map[string]float64{
				left + "{tollgate.bucket=pool,tollgate.scope=a,tollgate.window=1h0m0s}":                             980,
				left + "{tollgate.bucket=pool,tollgate.scope=b,tollgate.window=1h0m0s}":                             990,
				limit + "{tollgate.bucket=pool,tollgate.scope=a,tollgate.window=1h0m0s}":                            1000,
				requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted,tollgate.scope=b}": 10,
			})
			continue
		}
		want(t, p, map[string]float64{
			left + "{tollgate.bucket=pool,tollgate.window=1h0m0s}":  980,
			limit + "{tollgate.bucket=pool,tollgate.window=1h0m0s}": 1000,
		})
		for k := range p {
			if strings.Contains(k, "tollgate.scope") {
				t.Errorf("without WithScopes, a point names a scope: %s", k)
			}
		}
		r.points(t)
		if reader.reads != 4 {
			t.Errorf("%d usage reads after two collections, want 4", reader.reads)
		}
	}
}

// TestAnnouncedPause: an announcement that nothing is left of a bucket
// pauses it, counted with the reason "announced".
func TestAnnouncedPause(t *testing.T) {
	b := testBuckets(1000, time.Hour)
	b["tokens"] = tollgate.Bucket{Limits: []quota.Limit{quota.PerFixedWindow(0, time.Hour, time.Time{})}, Follows: "github/core"}
	r := newRig(t, tollgate.Config{Buckets: b, Transit: -1})
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	r.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
	})
	if err := r.get(t, context.Background(), "/v1/stats"); err != nil {
		t.Fatal(err)
	}
	want(t, r.points(t), map[string]float64{
		"tollgate.upstream.pauses{tollgate.bucket=tokens,tollgate.pause.reason=announced}": 1,
	})
}

// TestWindowAlerts: each crossing the Transport reports counts once, by
// threshold; a window's burn-rate alert counts one while it is on.
func TestWindowAlerts(t *testing.T) {
	r := newRig(t, tollgate.Config{Buckets: testBuckets(1000, time.Hour)})
	// The functions Instrument merged into the Trace, as the Transport
	// calls them from its checks.
	tr := r.metrics.Instrument(tollgate.Config{}).Trace
	ctx := context.Background()
	hour := quota.PerWindow(1000, time.Hour)
	tr.Crossed(ctx, tollgate.Alert{Scope: "s", Bucket: "pool", Limit: hour, Threshold: 0.8, Used: 810})
	tr.Crossed(ctx, tollgate.Alert{Scope: "s", Bucket: "pool", Limit: hour, Threshold: 0.95, Used: 960})
	tr.Burning(ctx, tollgate.Alert{Scope: "s", Bucket: "pool", Limit: hour, Firing: true})
	crossings := "tollgate.window.crossings{tollgate.bucket=pool,tollgate.window=1h0m0s,tollgate.window.threshold=%s}"
	burning := "tollgate.window.burning{tollgate.bucket=pool,tollgate.window=1h0m0s}"
	want(t, r.points(t), map[string]float64{
		fmt.Sprintf(crossings, "0.8"): 1, fmt.Sprintf(crossings, "0.95"): 1, burning: 1,
	})
	tr.Burning(ctx, tollgate.Alert{Scope: "s", Bucket: "pool", Limit: hour, Firing: false})
	want(t, r.points(t), map[string]float64{burning: 0})
}

// TestShadowRefusals: the Shadow action's would-be refusals are counted
// by bucket and cause; the requests are all admitted.
func TestShadowRefusals(t *testing.T) {
	r := newRig(t, tollgate.Config{
		Buckets: testBuckets(3, time.Hour),
		Policy:  tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Shadow}, nil),
	})
	for range 5 {
		if err := r.get(t, tollgate.WithCaller(context.Background(), "cron"), "/v1/items"); err != nil {
			t.Fatalf("a request in shadow: %v", err)
		}
	}
	want(t, r.points(t), map[string]float64{
		"tollgate.shadow.refusals{tollgate.bucket=pool,tollgate.caller=cron,tollgate.refusal.cause=no-room}":                        2,
		"tollgate.rate_limiting.requests{tollgate.caller=cron,tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}": 5,
	})
}
