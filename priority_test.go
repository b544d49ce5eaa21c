package tollgate_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/quota"
)

// priorityTable has a live endpoint and a backfill one, each 10 units of
// the pool; the backfill's policy makes it background.
func priorityTable(t *testing.T) (*costs.Table, func(costs.Endpoint) tollgate.Policy) {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /live", Endpoint: "live", Charges: []costs.Charge{{Bucket: "pool", Units: 10}}},
			{Pattern: "GET /backfill", Endpoint: "backfill", Charges: []costs.Charge{{Bucket: "pool", Units: 10}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab, tollgate.Policies(tollgate.Policy{MaxWait: time.Minute},
		map[string]tollgate.Policy{"backfill": {MaxWait: time.Minute, Priority: quota.Background}})
}

// TestBackgroundGetsItsShare: live workers (80% of the pool, paced) and
// backfill workers (as fast as they can) share one pool; backfill units
// never take more than their share of any window, nor the room live
// traffic needs, and backfill still progresses in what live leaves.
func TestBackgroundGetsItsShare(t *testing.T) {
	_, rc := realRedis(t)
	up := newUpstream(t)
	tab, policy := priorityTable(t)
	window := 400 * time.Millisecond
	const limit, share = 200, 0.5
	var mu sync.Mutex
	calls := map[string][]windowcheck.Call{}
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: limiterOn(t, rc), Costs: tab, Policy: policy, BackgroundShare: share,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(limit, window)}}},
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			if d.Admitted {
				mu.Lock()
				calls[d.Endpoint] = append(calls[d.Endpoint], windowcheck.Call{At: d.At, Units: 10})
				mu.Unlock()
			}
		}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*window)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 10 {
		path := "/backfill"
		if i < 4 {
			path = "/live"
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				send(t, tr, ctx, "GET", up.URL+path, nil)
				if path == "/live" { // 4 workers, 10 units each 100 ms: 160 of 200 a window
					select {
					case <-time.After(window / 4):
					case <-ctx.Done():
					}
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var all []windowcheck.Call
	for _, c := range calls {
		all = append(all, c...)
	}
	if most, at := windowcheck.Most(all, window); most > limit {
		t.Errorf("a window ending %v held %d units, over the limit of %d", at, most, limit)
	}
	if most, at := windowcheck.Most(calls["backfill"], window); most > limit*share {
		t.Errorf("a window ending %v held %d backfill units, over its share of %d", at, most, int(limit*share))
	}
	if len(calls["backfill"]) == 0 || len(calls["live"]) == 0 {
		t.Fatalf("live %d and backfill %d calls: both must progress", len(calls["live"]), len(calls["backfill"]))
	}
	t.Logf("live %d calls, backfill %d calls in %v", len(calls["live"]), len(calls["backfill"]), 5*window)
}

// TestInteractiveOvertakesWaitingBackground: a live request that arrives
// while a background request waits for the same room is admitted first,
// where arrival order alone would have served the background one; and a
// context can make any request background.
func TestInteractiveOvertakesWaitingBackground(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	tab, policy := priorityTable(t)
	window := 400 * time.Millisecond
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: lim, Costs: tab, Policy: policy, BackgroundShare: 1,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10, window)}}},
	})
	fill(t, lim, tollgate.DefaultScope, 10, 10, window)
	who := func(ctx context.Context, name string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/live", nil)
		req.Header.Set("X-Who", name)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A live endpoint, made background by its context.
		who(quota.WithPriority(context.Background(), quota.Background), "background")
	}()
	for i := 0; i < 500; i++ { // until it waits in the background room
		if n, _ := rc.ZCard(context.Background(), "tollgate:{default}:background").Result(); n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	who(context.Background(), "interactive")
	<-done
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.arrivals) != 2 {
		t.Fatalf("the upstream received %d requests, want 2", len(up.arrivals))
	}
	first, second := up.arrivals[0], up.arrivals[1]
	if first.header.Get("X-Who") != "interactive" || second.header.Get("X-Who") != "background" {
		t.Errorf("arrived %s then %s, want the interactive request first", first.header.Get("X-Who"), second.header.Get("X-Who"))
	}
	if gap := second.at.Sub(first.at); gap < window-50*time.Millisecond {
		t.Errorf("the background request arrived %v after the interactive one, want a window later: both cost the whole window", gap)
	}
}
