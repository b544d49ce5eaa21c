package quota

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
)

// TestMemoryIsBoundedBySlices: a window's Redis memory is bounded by its
// slices (a thousandth of the window each), whatever the call rate: 6,000
// calls spread over 40 minutes of a one-hour window leave at most one
// entry per slice they fell in, in a few kilobytes (MEMORY USAGE of the
// window's keys, every element counted). bench/ measures a million calls.
func TestMemoryIsBoundedBySlices(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := mustNew(t, c, WithClock(clock.Now))
	lim := PerWindow(MaxUnits, time.Hour) // slices of 3.6 s
	const calls, spread = 6000, 40 * time.Minute
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 { // concurrent callers share pipelines
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= calls {
					return
				}
				cost := int64(1)
				if i%5 == 0 {
					cost = 100
				}
				if r, err := l.Allow(ctx, "memory", charge("pool", cost, lim)); err != nil || !r.OK() {
					t.Errorf("call %d: %v", i, err)
					return
				}
				if i%10 == 9 {
					clock.Add(spread / calls * 10)
				}
			}
		})
	}
	wg.Wait()
	w := l.window("memory", "pool", lim)
	var total int64
	for _, key := range []string{w.log, w.meta} {
		n, err := c.MemoryUsage(ctx, key, 0).Result() // SAMPLES 0: every element
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	entries, err := c.LLen(ctx, w.log).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices := int64(spread/(time.Hour/1000)) + 1
	t.Logf("%d calls in %d entries: %d bytes (%.2f a call)", calls, entries, total, float64(total)/calls)
	if entries > slices {
		t.Errorf("%d entries for calls over %d slices: a slice holds one entry", entries, slices)
	}
	if total > 32<<10 {
		t.Errorf("%d bytes for one window, want at most 32 KiB", total)
	}
	if u := mustUsage(t, l, "memory", "pool", lim); u.Used != calls/5*100+calls*4/5 {
		t.Errorf("used %d, want every call's units", u.Used)
	}
}
