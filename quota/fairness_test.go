package quota

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testFairnessFIFO checks, on an injected clock, that a 100-unit waiter is
// not starved by 1-unit callers: it gets a hold at the first instant its cost
// fits, and callers arriving after it queue behind it even though each
// of them alone would fit sooner.
func testFairnessFIFO(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, 10*time.Second)

	reserve := func(at time.Duration, cost int64) *Reservation {
		t.Helper()
		clock.Set(t0.Add(at))
		r, err := l.Reserve(ctx, s, -1, charge("b", cost, lim))
		if err != nil || !r.OK() {
			t.Fatalf("Reserve(cost %d) at +%v: OK=%v err=%v", cost, at, r.OK(), err)
		}
		return r
	}
	// A steady stream of 1-unit calls fills the window over 9 seconds.
	for i := range 100 {
		reserve(time.Duration(i)*90*time.Millisecond, 1)
	}
	big := reserve(9500*time.Millisecond, 100)
	// Its turn: when every unit of the stream has left, 10s after the last.
	if want := t0.Add(8910*time.Millisecond + 10*time.Second); !big.Time().Equal(want) {
		t.Errorf("100-unit hold at %v, want %v", big.Time().Sub(t0), want.Sub(t0))
	}
	// The stream goes on. From +10s single units would fit again, but they
	// arrived after the waiter and must not pass it.
	for i := range 20 {
		small := reserve(9600*time.Millisecond+time.Duration(i)*500*time.Millisecond, 1)
		if small.Time().Before(big.Time()) {
			t.Fatalf("1-unit call arriving at +%v admitted at +%v, before the waiter's +%v",
				small.Decided().Sub(t0), small.Time().Sub(t0), big.Time().Sub(t0))
		}
		// It cannot share the waiter's window either: U is spent by it.
		if want := big.Time().Add(10 * time.Second); small.Time().Before(want) {
			t.Fatalf("1-unit call admitted at +%v while the 100-unit waiter fills the window until +%v",
				small.Time().Sub(t0), want.Sub(t0))
		}
	}
}

// testFIFOAcrossBuckets checks that a hold keeps its place in every log it
// joins: a call arriving after a waiter does not pass it, even on a bucket
// where it alone would fit now.
func testFIFOAcrossBuckets(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 6, 2, 8, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	pool := PerWindow(100, 10*time.Second)
	search := PerWindow(1, 10*time.Second)
	both := []Demand{charge("pool", 1, pool), charge("search", 1, search)}

	mustAllow(t, l, s, both...)
	clock.Set(t0.Add(time.Second))
	waiter, err := l.Reserve(ctx, s, time.Minute, both...)
	if err != nil || !waiter.OK() || !waiter.Time().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("search waiter: OK=%v Time=%v err=%v, want a hold at +10s", waiter.OK(), waiter.Time(), err)
	}
	clock.Set(t0.Add(2 * time.Second))
	later, err := l.Reserve(ctx, s, time.Minute, charge("pool", 1, pool))
	if err != nil || !later.OK() {
		t.Fatalf("pool call: OK=%v err=%v", later.OK(), err)
	}
	if later.Time().Before(waiter.Time()) {
		t.Errorf("pool call arriving at +2s admitted at +%v, before the waiter that arrived at +1s (+%v)",
			later.Time().Sub(t0), waiter.Time().Sub(t0))
	}
}

// testFairnessUnderLoad runs the same race on the Redis clock: goroutines
// keep spending single units through Wait while a 100-unit Wait arrives. The
// waiter must be admitted exactly at its first-come turn, and no call
// decided after it may be admitted before it.
func testFairnessUnderLoad(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	window := 300 * time.Millisecond
	lim := PerWindow(100, window)

	type call struct{ decided, at time.Time }
	var (
		mu    sync.Mutex
		calls []call
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 2000 && !stop.Load(); i++ {
				r, err := l.Wait(context.Background(), s, charge("b", 1, lim))
				if err != nil {
					t.Errorf("1-unit Wait: %v", err)
					return
				}
				mu.Lock()
				calls = append(calls, call{r.Decided(), r.Time()})
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * window) // let the stream saturate the window
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big, err := l.Wait(ctx, s, charge("b", 100, lim))
	time.Sleep(window) // let the stream run on behind the waiter
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("100-unit Wait: %v", err)
	}

	// Its turn is a window after the newest entry decided before it.
	var before, tied time.Time
	overtaken := 0
	for _, c := range calls {
		switch {
		case c.decided.Before(big.Decided()):
			if c.at.After(before) {
				before = c.at
			}
		case c.decided.Equal(big.Decided()):
			if c.at.After(tied) {
				tied = c.at
			}
		case c.at.Before(big.Time()):
			overtaken++
		}
	}
	if overtaken > 0 {
		t.Errorf("%d single-unit calls decided after the waiter were admitted before it", overtaken)
	}
	if before.IsZero() {
		t.Fatal("no single-unit call was decided before the waiter; the stream never ran")
	}
	turn := before.Add(window)
	if tied.After(before) && big.Time().Equal(tied.Add(window)) {
		turn = tied.Add(window) // a call decided in the same µs went first
	}
	if !big.Time().Equal(turn) {
		t.Errorf("waiter admitted at %v, want its turn %v (%v after the newest earlier entry)",
			big.Time(), turn, window)
	}
}
