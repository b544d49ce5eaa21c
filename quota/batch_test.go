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

// pipelineSizes is a go-redis hook that records how many reserve decisions
// each pipeline carried.
type pipelineSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (p *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (p *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && args[1] == reserveScript.Hash() {
				n++
			}
		}
		p.mu.Lock()
		p.sizes = append(p.sizes, n)
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

// largest returns the most decisions any pipeline carried.
func (p *pipelineSizes) largest() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	most := 0
	for _, n := range p.sizes {
		most = max(most, n)
	}
	return most
}

// slowRedis starts a redis-server behind a proxy that delays each way, and
// a client through the proxy that records pipeline sizes.
func slowRedis(t *testing.T, delay time.Duration) (*redis.Client, *redistest.Proxy, *pipelineSizes) {
	t.Helper()
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr, delay)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	sizes := &pipelineSizes{}
	c.AddHook(sizes)
	return c, p, sizes
}

// TestConcurrentDecisionsShareAPipeline: with one pipeline allowed in flight
// and a slow link, callers that arrive meanwhile leave together in the
// next pipeline, and every one of them gets its own, exact decision, even
// when the script cache was emptied and the pipeline's EVALSHAs all fail.
func TestConcurrentDecisionsShareAPipeline(t *testing.T) {
	c, _, sizes := slowRedis(t, 20*time.Millisecond)
	l := New(c, WithPipelines(1))
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

// TestQueuedDecisionLeavesOnCancel: a caller whose context ends while its
// decision waits for a pipeline gets the context's error at once, and its
// decision never reaches Redis; the limiter goes on deciding afterwards.
func TestQueuedDecisionLeavesOnCancel(t *testing.T) {
	c, proxy, _ := slowRedis(t, 0)
	l := New(c, WithPipelines(1))
	lim := PerWindow(10, time.Hour)
	ch := charge("b", 1, lim)
	// Connect and load the script first, so that only the decision is slow.
	mustAllow(t, l, "warm-up", ch)
	proxy.SetDelay(300 * time.Millisecond)

	first := make(chan error, 1)
	go func() {
		_, err := l.Allow(context.Background(), "s", ch)
		first <- err
	}()
	waitFor(t, &l.batch, func(b *batcher) bool { return b.inFlight == 1 && len(b.queue) == 0 })

	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, "s", ch)
		queued <- err
	}()
	waitFor(t, &l.batch, func(b *batcher) bool { return len(b.queue) == 1 })
	cancel()
	select {
	case err := <-queued:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("queued Allow after cancel: %v, want context.Canceled", err)
		}
	case err := <-first:
		t.Fatalf("the decision in flight returned (%v) before the queued one saw its cancel", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	proxy.SetDelay(0)
	if u := mustUsage(t, l, "s", "b", lim); u.Used != 1 {
		t.Errorf("Usage.Used = %d, want 1: the cancelled decision reached Redis", u.Used)
	}
	if r := mustAllow(t, l, "s", ch); !r.OK() {
		t.Error("Allow after the cancel was refused")
	}
	l.batch.mu.Lock()
	defer l.batch.mu.Unlock()
	if l.batch.inFlight != 0 || len(l.batch.queue) != 0 {
		t.Errorf("batcher left with %d in flight and %d queued, want none", l.batch.inFlight, len(l.batch.queue))
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
	l := New(c, WithPipelines(0))
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
	c, proxy, _ := slowRedis(t, 0)
	l := New(c, WithPipelines(1))
	lim := PerWindow(10, time.Hour)
	ch := charge("b", 1, lim)
	mustAllow(t, l, "warm-up", ch)
	proxy.SetDelay(300 * time.Millisecond)

	allow := func(ctx context.Context) chan error {
		out := make(chan error, 1)
		go func() {
			_, err := l.Allow(ctx, "s", ch)
			out <- err
		}()
		return out
	}
	first := allow(context.Background())
	waitFor(t, &l.batch, func(b *batcher) bool { return b.inFlight == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	late := allow(ctx)
	other := allow(context.Background())
	waitFor(t, &l.batch, func(b *batcher) bool { return len(b.queue) == 2 })
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The two queued decisions have left together; cancel one of them.
	cancel()
	select {
	case err := <-late:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Allow cancelled on its way: %v, want context.Canceled", err)
		}
	case err := <-other:
		t.Fatalf("the other decision returned (%v) before the cancelled one saw its cancel", err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	proxy.SetDelay(0)
	var used int64
	for range 500 {
		if used = mustUsage(t, l, "s", "b", lim).Used; used == 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("Usage.Used = %d, want 2: the late decision's unit was not given back", used)
}
