package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// fill spends units of the pool in scope directly, as another process would.
func fill(t *testing.T, lim *quota.Limiter, scope string, units, limit int64, window time.Duration) *quota.Reservation {
	t.Helper()
	r, err := lim.Allow(context.Background(), scope,
		quota.Demand{Bucket: "pool", Units: units, Limits: []quota.Limit{quota.PerWindow(limit, window)}})
	if err != nil || !r.OK() {
		t.Fatalf("filling the pool: OK=%v err=%v", r.OK(), err)
	}
	return r
}

func TestWaitSleepsUntilItsTurn(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	window := 400 * time.Millisecond
	var d, waits decisions
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, window),
		Trace: tollgate.Trace{Decided: d.hook, WaitStarted: waits.hook}})
	first := fill(t, lim, tollgate.DefaultScope, 100, 100, window)

	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	turn := first.Time().Add(window)
	got := up.last().at
	if got.Before(turn) {
		t.Errorf("request arrived %v before its turn", turn.Sub(got))
	}
	if late := got.Sub(turn); late > 200*time.Millisecond {
		t.Errorf("request arrived %v after its turn; it should have been sent when due", late)
	}
	ev := d.list()[0]
	if !ev.Admitted || mode(ev) != "redis" || ev.Waited < window/2 {
		t.Errorf("decision = %+v, want admitted on Redis after waiting", ev)
	}
	if w := waits.list(); len(w) != 1 || !w[0].At.Equal(turn) || w[0].Endpoint != "items.list" {
		t.Errorf("wait hook saw %+v, want one wait for items.list until %v", w, turn)
	}
}

func TestWaitCancelledGivesItsHoldBack(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	window := time.Minute
	// MaxWait well past the hold's instant, a window after the fill.
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, window),
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: 2 * window}, nil)})
	fill(t, lim, tollgate.DefaultScope, 100, 100, window)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := send(t, tr, ctx, "GET", up.URL+"/v1/items", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("RoundTrip took %v to notice the cancellation", took)
	}
	u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", quota.PerWindow(100, window))
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 100 || u.Held != 0 {
		t.Errorf("after the cancelled wait: used %d held %d, want 100 and 0 (the hold given back)", u.Used, u.Held)
	}
	if up.count() != 0 {
		t.Errorf("the upstream received %d requests, want 0", up.count())
	}
}

func TestErrorPolicyReturnsQuotaError(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	window := time.Minute
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: lim, Costs: table(t), Buckets: buckets(150, window),
		Scope:  tollgate.Scope("project-a"),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	first := fill(t, lim, "project-a", 100, 150, window)
	before := time.Now()
	_, err := get(t, tr, up.URL+"/v1/search")
	after := time.Now()
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Fatalf("RoundTrip = %v, want a *QuotaError", err)
	}
	if qe.Endpoint != "search.list" || qe.Scope != "project-a" || qe.Bucket != "pool" || qe.Units != 100 || qe.Cause != tollgate.NoRoom {
		t.Errorf("QuotaError = %+v, want search.list in project-a, bucket pool, cost 100, not upstream", qe)
	}
	// The 100 units of the fill leave a minute after it: RetryAfter counts
	// from the decision, made between before and after (on the same clock:
	// Redis runs on this machine), so it lies between the two, whatever
	// the round trips took on a loaded machine. A millisecond covers the
	// decision clock's rounding; a second below, RetryAfter's own.
	leaves := first.Time().Add(window)
	if hi, lo := leaves.Sub(before)+time.Millisecond, leaves.Sub(after)-time.Second; qe.RetryAfter > hi || qe.RetryAfter < lo {
		t.Errorf("RetryAfter = %v, want between %v and %v: when the fill leaves the window", qe.RetryAfter, lo, hi)
	}
	if up.count() != 0 {
		t.Errorf("the upstream received %d requests, want 0", up.count())
	}
	// A cheap call still fits.
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Errorf("1-unit call: %v", err)
	}
}

func TestFailoverReachesTheNextRouteThenStops(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	window := time.Minute
	setKey := func(k string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("X-Api-Key", k) }
	}
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: lim, Costs: table(t), Buckets: buckets(3, window),
		Scope:  tollgate.Scope("project-a"),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.Refuse}, nil),
		Routes: []tollgate.Route{
			{Name: "b", Scope: "project-b", Rewrite: setKey("key-b")},
			{Name: "c", Scope: "project-c", Rewrite: setKey("key-c")},
		},
	})
	var keys []string
	var err error
	for i := 0; i < 12 && err == nil; i++ {
		req, _ := http.NewRequest("GET", up.URL+"/v1/items", nil)
		req.Header.Set("X-Api-Key", "key-a")
		var resp *http.Response
		if resp, err = tr.RoundTrip(req); err == nil {
			resp.Body.Close()
			keys = append(keys, up.last().header.Get("X-Api-Key"))
		}
		if got := req.Header.Get("X-Api-Key"); got != "key-a" {
			t.Fatalf("the route's rewrite changed the caller's request: key %q", got)
		}
	}
	if got, want := strings.Join(keys, ","), "key-a,key-a,key-a,key-b,key-b,key-b,key-c,key-c,key-c"; got != want {
		t.Errorf("keys sent = %s, want %s", got, want)
	}
	if !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("after every route was spent: %v, want a *QuotaError", err)
	}
}

// memoryCache is a Base that answers without the upstream, like a cache.
type memoryCache struct{ hits int }

func (c *memoryCache) RoundTrip(req *http.Request) (*http.Response, error) {
	c.hits++
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{"X-Cache": {"hit"}}, Request: req}, nil
}

func TestFailoverToACacheThenWait(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	window := 300 * time.Millisecond
	cache := &memoryCache{}
	pol := tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.WaitTurn}
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: lim, Costs: table(t), Buckets: buckets(100, window),
		Policy: tollgate.Policies(tollgate.Policy{}, map[string]tollgate.Policy{"items.list": pol}),
		Routes: []tollgate.Route{{Name: "cache", Base: cache}},
	})
	fill(t, lim, tollgate.DefaultScope, 100, 100, window)
	resp, err := get(t, tr, up.URL+"/v1/items")
	if err != nil || resp.Header.Get("X-Cache") != "hit" || up.count() != 0 {
		t.Fatalf("items.list with the pool spent: err %v, cache hits %d, upstream %d; want a cache hit", err, cache.hits, up.count())
	}
	// With every route spent, AfterFailover says wait for the pool's turn.
	fill(t, lim, "b", 100, 100, window)
	tr2 := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, window),
		Policy: tollgate.Policies(pol, nil), Routes: []tollgate.Route{{Name: "b", Scope: "b"}}})
	if _, err := get(t, tr2, up.URL+"/v1/items"); err != nil || up.count() != 1 {
		t.Errorf("with every route spent, Wait: err %v, upstream %d; want sent after waiting", err, up.count())
	}
}

// TestTransitLengthensSlidingWindows: a request counts for Transit longer
// than its window, so a hold behind it is placed that much later.
func TestTransitLengthensSlidingWindows(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	window, transit := 300*time.Millisecond, 200*time.Millisecond
	var d decisions
	tr := newTransport(t, tollgate.Config{Limiter: lim, Costs: table(t), Buckets: buckets(100, window), Transit: transit, Trace: tollgate.Trace{Decided: d.hook}})
	for range 2 { // 100 units: the pool is full
		if _, err := send(t, tr, context.Background(), "POST", up.URL+"/v1/upload", nil); err != nil {
			t.Fatal(err)
		}
	}
	u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", quota.PerWindow(100, window+transit))
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 100 {
		t.Errorf("the %v window plus %v of transit holds %d units, want 100", window, transit, u.Used)
	}
	if _, err := send(t, tr, context.Background(), "POST", up.URL+"/v1/upload", nil); err != nil {
		t.Fatal(err)
	}
	evs := d.list()
	if gap := evs[2].At.Sub(evs[0].At); gap < window+transit {
		t.Errorf("the third upload was admitted %v after the first, want at least %v", gap, window+transit)
	}
}

// TestShortMaxWaitAdmitsWhatHasRoom: a MaxWait shorter than a Redis round
// trip bounds only the wait for a turn, never the decision itself. A
// program sending through an http.Client gets every request that has room
// sent (20 of 20, interactive or background, with or without a cap on
// requests in flight), and the next one, which would have to wait an
// hour, refused at once.
func TestShortMaxWaitAdmitsWhatHasRoom(t *testing.T) {
	_, rc := realRedis(t)
	up := newUpstream(t)
	cases := []struct {
		name     string
		maxWait  time.Duration
		priority quota.Priority
		inFlight int
	}{
		{"1ns", time.Nanosecond, quota.Interactive, 0},
		{"1µs", time.Microsecond, quota.Interactive, 0},
		{"1ns background", time.Nanosecond, quota.Background, 0},
		{"1ns capped", time.Nanosecond, quota.Interactive, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const limit = 20
			bs := buckets(limit, time.Hour)
			pool := bs["pool"]
			pool.MaxInFlight = c.inFlight
			bs["pool"] = pool
			tr := newTransport(t, tollgate.Config{
				Limiter: limiterOn(t, rc), Costs: table(t), Buckets: bs, BackgroundShare: 1,
				Scope:  tollgate.Scope("short-wait-" + c.name),
				Policy: tollgate.Policies(tollgate.Policy{MaxWait: c.maxWait, Priority: c.priority}, nil),
			})
			client := &http.Client{Transport: tr}
			before := up.count()
			sent := 0
			for i := range limit {
				resp, err := client.Get(up.URL + "/v1/items")
				if err != nil {
					t.Errorf("request %d of %d on a fresh quota: %v", i+1, limit, err)
					continue
				}
				resp.Body.Close()
				sent++
			}
			if got := up.count() - before; sent != limit || got != limit {
				t.Errorf("%d of %d requests sent, %d reached the upstream; want %d of %d", sent, limit, got, limit, limit)
			}
			_, err := client.Get(up.URL + "/v1/items")
			var qe *tollgate.QuotaError
			if !errors.As(err, &qe) || qe.RetryAfter <= 0 {
				t.Errorf("request %d, with the quota spent for an hour: %v, want a *QuotaError with a RetryAfter", limit+1, err)
			}
		})
	}
}
