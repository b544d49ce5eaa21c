package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestMemoryPerLoggedCall: 10,000 calls in one scope's window cost Redis
// under 100 bytes each (MEMORY USAGE of the window's keys, counted whole),
// whatever their cost.
func TestMemoryPerLoggedCall(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	l := mustNew(t, c)
	lim := PerWindow(MaxUnits, time.Hour)
	const calls = 10000
	for i := range calls {
		cost := int64(1)
		if i%5 == 0 {
			cost = 100
		}
		if r, err := l.Allow(ctx, "memory", charge("pool", cost, lim)); err != nil || !r.OK() {
			t.Fatalf("call %d: OK=%v err=%v", i, r.OK(), err)
		}
	}
	w := l.window("memory", "pool", lim)
	var total int64
	for _, key := range []string{w.log, w.meta, w.sum} {
		n, err := c.MemoryUsage(ctx, key, 0).Result() // SAMPLES 0: every element
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if n, _ := c.LLen(ctx, w.log).Result(); n != calls {
		t.Fatalf("the log holds %d entries, want %d", n, calls)
	}
	perCall := float64(total) / calls
	t.Logf("%d bytes for %d calls: %.1f bytes a call", total, calls, perCall)
	if perCall >= 100 {
		t.Errorf("%.1f bytes a logged call, want under 100", perCall)
	}
}
