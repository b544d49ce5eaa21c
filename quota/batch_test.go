package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// slowRedis starts a redis-server behind a proxy that delays each way, and
// a client through the proxy that watches its decisions.
func slowRedis(t *testing.T, delay time.Duration) (*redis.Client, *redistest.Proxy, *decisionWatch) {
	t.Helper()
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr, delay)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	sizes := &decisionWatch{}
	c.AddHook(sizes)
	return c, p, sizes
}

// TestConcurrentDecisionsShareAPipeline: with one pipeline allowed in flight
// and a slow link, callers that arrive meanwhile leave together in the
// next pipeline, and every one of them gets its own, exact decision, even
// when the script cache was emptied and the pipeline's EVALSHAs all fail.
func TestConcurrentDecisionsShareAPipeline(t *testing.T) {
	c, _, sizes := slowRedis(t, 20*time.Millisecond)
	l := mustNew(t, c, WithPipelines(1))
	ctx := context.Background()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const callers, each, units = 50, 4, 120
	ch := charge("b", 1, PerWindow(units, time.Hour))
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				r, err := l.Allow(ctx, "shared", ch)
				if err != nil {
					t.Error(err)
					return
				}
				if r.OK() {
					admitted.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if a, r := admitted.Load(), refused.Load(); a != units || r != callers*each-units {
		t.Errorf("admitted %d and refused %d of %d calls, want %d and %d", a, r, callers*each, units, callers*each-units)
	}
	if most := sizes.largest(); most < 2 {
		t.Errorf("the largest pipeline carried %d decisions, want several: callers did not share round trips", most)
	}
	if u := mustUsage(t, l, "shared", "b", PerWindow(units, time.Hour)); u.Used != units {
		t.Errorf("Usage.Used = %d, want %d", u.Used, units)
	}
}

// cancelRig is a limiter with one pipeline, its script loaded and its
// connection open, behind a link that then takes 300ms each way: long
// enough for a test to queue, send and cancel decisions while one is in
// flight.
type cancelRig struct {
	l     *Limiter
	proxy *redistest.Proxy
	lim   Limit
	ch    Demand
}

func newCancelRig(t *testing.T) *cancelRig {
	t.Helper()
	c, proxy, _ := slowRedis(t, 0)
	r := &cancelRig{l: mustNew(t, c, WithPipelines(1)), proxy: proxy, lim: PerWindow(10, time.Hour)}
	r.ch = charge("b", 1, r.lim)
	mustAllow(t, r.l, "warm-up", r.ch)
	proxy.SetDelay(300 * time.Millisecond)
	return r
}

// allow calls Allow on scope "s" in the background; the channel gets its error.
func (r *cancelRig) allow(ctx context.Context) chan error {
	out := make(chan error, 1)
	go func() {
		_, err := r.l.Allow(ctx, "s", r.ch)
		out <- err
	}()
	return out
}

// cancelledFirst checks that the cancelled call returns context.Canceled
// before the other one returns, then waits for the other to succeed.
func cancelledFirst(t *testing.T, cancelled, other chan error) {
	t.Helper()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Allow: %v, want context.Canceled", err)
		}
	case err := <-other:
		t.Fatalf("a decision returned (%v) before the cancelled one saw its cancel", err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
}

// TestQueuedDecisionLeavesOnCancel: a caller whose context ends while its
// decision waits for a pipeline gets the context's error at once, and its
// decision never reaches Redis; the limiter goes on deciding afterwards.
func TestQueuedDecisionLeavesOnCancel(t *testing.T) {
	r := newCancelRig(t)
	first := r.allow(context.Background())
	waitFor(t, &r.l.batch, func(b *batcher) bool { return b.inFlight == 1 && len(b.queue) == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	queued := r.allow(ctx)
	waitFor(t, &r.l.batch, func(b *batcher) bool { return len(b.queue) == 1 })
	cancel()
	cancelledFirst(t, queued, first)

	r.proxy.SetDelay(0)
	if u := mustUsage(t, r.l, "s", "b", r.lim); u.Used != 1 {
		t.Errorf("Usage.Used = %d, want 1: the cancelled decision reached Redis", u.Used)
	}
	if res := mustAllow(t, r.l, "s", r.ch); !res.OK() {
		t.Error("Allow after the cancel was refused")
	}
	b := &r.l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight != 0 || len(b.queue) != 0 {
		t.Errorf("batcher left with %d in flight and %d queued, want none", b.inFlight, len(b.queue))
	}
}

// waitFor polls the batcher's state, under its lock, for up to 10 seconds.
func waitFor(t *testing.T, b *batcher, cond func(*batcher) bool) {
	t.Helper()
	for range 1000 {
		b.mu.Lock()
		ok := cond(b)
		b.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the batcher never reached the state the test waits for")
}

// TestWithoutPipelines: WithPipelines(0) sends each decision on its own.
func TestWithoutPipelines(t *testing.T) {
	c, _, sizes := slowRedis(t, time.Millisecond)
	l := mustNew(t, c, WithPipelines(0))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := l.Allow(context.Background(), "s", charge("b", 1, PerWindow(100, time.Hour))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most := sizes.largest(); most != 0 {
		t.Errorf("a pipeline carried %d decisions, want none", most)
	}
	if u := mustUsage(t, l, "s", "b", PerWindow(100, time.Hour)); u.Used != 20 {
		t.Errorf("Usage.Used = %d, want 20", u.Used)
	}
}

// TestLateDecisionIsGivenBack: a caller whose context ends while its
// decision is on its way returns at once; when the answer comes, the units
// it admitted are given back, since no call will spend them.
func TestLateDecisionIsGivenBack(t *testing.T) {
	r := newCancelRig(t)
	first := r.allow(context.Background())
	waitFor(t, &r.l.batch, func(b *batcher) bool { return b.inFlight == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	late := r.allow(ctx)
	other := r.allow(context.Background())
	waitFor(t, &r.l.batch, func(b *batcher) bool { return len(b.queue) == 2 })
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The two queued decisions have left together; cancel one of them.
	cancel()
	cancelledFirst(t, late, other)

	r.proxy.SetDelay(0)
	var used int64
	for range 500 {
		if used = mustUsage(t, r.l, "s", "b", r.lim).Used; used == 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("Usage.Used = %d, want 2: the late decision's unit was not given back", used)
}
