package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// TestSharesPerCaller: a bucket with shares gives each caller its part of
// a day, the tenant being the caller (WithCaller) or else the Transport's
// Name; a greedy caller's refusal is not remembered for the others.
func TestSharesPerCaller(t *testing.T) {
	up := newUpstream(t)
	rdb := inProcessClient(t)
	clock := testclock.New(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	lim := limiterOn(t, rdb, quota.WithClock(clock.Now))
	shares := &tollgate.Shares{Weights: map[string]float64{"eu": 1, "us": 1, "ap": 2}}
	cfg := tollgate.Config{
		Limiter: lim, Costs: table(t), Transit: -1, Name: "ap",
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerDay(100, time.UTC)}, Shares: shares},
			"search": {Limits: []quota.Limit{quota.PerDay(10, time.UTC)}},
		},
		Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} },
	}
	tr := newTransport(t, cfg)
	tollgate.SetClock(tr, clock.Now)
	spend := func(ctx context.Context, n int) (admitted int) {
		t.Helper()
		for range n {
			_, err := send(t, tr, ctx, "GET", up.URL+"/v1/items", nil)
			switch {
			case err == nil:
				admitted++
			case !errors.Is(err, tollgate.ErrQuotaExhausted):
				t.Fatal(err)
			}
		}
		return admitted
	}
	eu := tollgate.WithCaller(context.Background(), "eu")
	us := tollgate.WithCaller(context.Background(), "us")
	if got := spend(eu, 100); got != 25 {
		t.Errorf("eu, greedy: %d admitted, want its share, 25", got)
	}
	if got := spend(us, 30); got != 25 {
		t.Errorf("us after eu: %d admitted, want its share, 25", got)
	}
	if got := spend(context.Background(), 60); got != 50 {
		t.Errorf("the Transport's own requests (tenant %q): %d admitted, want its share, 50", cfg.Name, got)
	}
	if n := up.count(); n != 100 {
		t.Errorf("the upstream saw %d requests, want the day's 100", n)
	}
}

// TestPaceThroughTransport: a paced day lets Burst of it go at once, and a
// refusal's RetryAfter is when the pace line reaches the next request.
func TestPaceThroughTransport(t *testing.T) {
	up := newUpstream(t)
	rdb := inProcessClient(t)
	clock := testclock.New(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	lim := limiterOn(t, rdb, quota.WithClock(clock.Now))
	cfg := tollgate.Config{
		Limiter: lim, Costs: table(t), Transit: -1,
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerDay(2400, time.UTC)}, ReserveUnits: 1000, Pace: &tollgate.Pace{Burst: 0.5}},
			"search": {Limits: []quota.Limit{quota.PerDay(10, time.UTC)}},
		},
		Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} },
	}
	tr := newTransport(t, cfg)
	tollgate.SetClock(tr, clock.Now)
	for i := range 700 {
		if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
			t.Fatalf("request %d of the burst (700 of 1400): %v", i, err)
		}
	}
	_, err := get(t, tr, up.URL+"/v1/items")
	var qe *tollgate.QuotaError
	// 700 of the line's 1400 a day are paced: one unit every 24h/700,
	// the first at the next whole µs past 123.428571428s.
	if want := 123428572 * time.Microsecond; !errors.As(err, &qe) || qe.RetryAfter != want {
		t.Fatalf("past the burst: %v, want a refusal until the line reaches it, %v", err, want)
	}
	clock.Add(qe.RetryAfter)
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatalf("at the RetryAfter: %v", err)
	}
}

// inProcessClient returns a client of a miniredis of the test's own.
func inProcessClient(t *testing.T) *redis.Client {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPaceGreedyTenant: a single greedy tenant on a paced fixed window
// (1,000 units an hour, Burst 0.1) asks again as soon as each refusal's
// RetryAfter says: the upstream never sees it ahead of the pace line, and
// by the window's end it has spent at least 95% of it.
func TestPaceGreedyTenant(t *testing.T) {
	start := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(start)
	var mu sync.Mutex
	var arrivals []time.Time
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		arrivals = append(arrivals, clock.Now())
	})
	lim := limiterOn(t, inProcessClient(t), quota.WithClock(clock.Now))
	const units, burst = 1000, 0.1
	cfg := tollgate.Config{
		Limiter: lim, Costs: table(t), Transit: -1,
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerFixedWindow(units, time.Hour, start.Add(time.Hour))}, Pace: &tollgate.Pace{Burst: burst}},
			"search": {Limits: []quota.Limit{quota.PerDay(10, time.UTC)}},
		},
		Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} },
	}
	tr := newTransport(t, cfg)
	tollgate.SetClock(tr, clock.Now)
	for clock.Now().Before(start.Add(time.Hour)) {
		_, err := get(t, tr, up.URL+"/v1/items")
		var qe *tollgate.QuotaError
		switch {
		case err == nil:
		case errors.As(err, &qe) && qe.RetryAfter > 0:
			clock.Add(qe.RetryAfter)
		default:
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, at := range arrivals {
		if at.Before(start.Add(time.Hour)) {
			line := burst*units + (1-burst)*units*float64(at.Sub(start))/float64(time.Hour)
			if float64(i+1) > line {
				t.Fatalf("request %d reached the upstream at %v, ahead of the pace line %.3f", i+1, at.Sub(start), line)
			}
		}
	}
	n := 0
	for _, at := range arrivals {
		if at.Before(start.Add(time.Hour)) {
			n++
		}
	}
	if n < 950 {
		t.Errorf("the greedy tenant spent %d of the window's %d, want at least 95%%", n, units)
	}
	t.Logf("spent %d of %d in the window", n, units)
}
