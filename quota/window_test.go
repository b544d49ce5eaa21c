package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testWindowBoundaryBurst shows why the log slides. A burst of a whole limit
// just before a window boundary and another just after it: a fixed window
// counter starts afresh at the boundary and admits both, twice the limit
// within 200ms. The sliding log admits the limit once, because at every
// instant it counts the window that ends at that instant.
func testWindowBoundaryBurst(t *testing.T, b *backend) {
	const limit = 50
	window := 10 * time.Second
	boundary := time.Date(2026, 3, 2, 12, 0, 10, 0, time.UTC) // a multiple of 10s
	clock := testclock.New(boundary.Add(-100 * time.Millisecond))
	l := b.limiter(t, WithClock(clock.Now))

	burst := func(s string, c Demand) (admitted int) {
		for range limit {
			if mustAllow(t, l, s, c).OK() {
				admitted++
			}
		}
		return admitted
	}

	sliding := charge("calls", 1, PerWindow(limit, window))
	first := burst(scope(t, "sliding"), sliding)
	clock.Set(boundary.Add(100 * time.Millisecond))
	second := burst(scope(t, "sliding"), sliding)
	if first+second != limit {
		t.Errorf("sliding window admitted %d+%d across the boundary, want %d in total", first, second, limit)
	}

	// A calendar day is a fixed window on purpose: the upstream itself
	// resets at midnight, so a burst on each side of it is two days' worth.
	day := charge("calls", 1, PerDay(limit, time.UTC))
	midnight := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	clock.Set(midnight.Add(-100 * time.Millisecond))
	first = burst(scope(t, "day"), day)
	clock.Set(midnight.Add(100 * time.Millisecond))
	second = burst(scope(t, "day"), day)
	if first != limit || second != limit {
		t.Errorf("calendar day admitted %d then %d across midnight, want %d each", first, second, limit)
	}
}

// testRetryAfterExact checks that a refusal names the instant the cost fits:
// when enough of the oldest units have left the window, not a window later.
func testRetryAfterExact(t *testing.T, b *backend) {
	t0 := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(10, 10*time.Second)

	for _, step := range []struct {
		at   time.Duration
		cost int64
	}{{0, 3}, {2 * time.Second, 4}, {5 * time.Second, 3}} {
		clock.Set(t0.Add(step.at))
		if r := mustAllow(t, l, s, charge("b", step.cost, lim)); !r.OK() {
			t.Fatalf("cost %d at +%v refused; the window had room", step.cost, step.at)
		}
	}

	clock.Set(t0.Add(6 * time.Second))
	cases := []struct {
		cost int64
		want time.Duration
	}{
		{1, 4 * time.Second}, // the 3 units of +0s leave at +10s
		{3, 4 * time.Second},
		{4, 6 * time.Second}, // needs the 4 units of +2s gone too: +12s
		{7, 6 * time.Second},
		{8, 9 * time.Second}, // needs all three entries gone: +15s
		{10, 9 * time.Second},
	}
	for _, c := range cases {
		r := mustAllow(t, l, s, charge("b", c.cost, lim))
		if r.OK() {
			t.Fatalf("cost %d admitted into a full window", c.cost)
		}
		if got := r.RetryAfter(); got != c.want {
			t.Errorf("cost %d: RetryAfter = %v, want %v", c.cost, got, c.want)
		}
	}

	clock.Set(t0.Add(12*time.Second - time.Microsecond))
	if r := mustAllow(t, l, s, charge("b", 4, lim)); r.OK() || r.RetryAfter() != time.Microsecond {
		t.Errorf("1µs early: OK=%v RetryAfter=%v, want refused with 1µs", r.OK(), r.RetryAfter())
	}
	clock.Set(t0.Add(12 * time.Second))
	if r := mustAllow(t, l, s, charge("b", 4, lim)); !r.OK() {
		t.Errorf("at the RetryAfter instant: refused with %v, want admitted", r.RetryAfter())
	}
}

// testRetryAfterRedisClock checks RetryAfter on the server's own clock: it
// is the instant the oldest entry leaves, minus the refusal's instant; the
// entry is the first slice, which leaves when the latest call in it does,
// at most a slice (a thousandth of the window) after the first call.
func testRetryAfterRedisClock(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	window := 5 * time.Second
	c := charge("b", 1, PerWindow(5, window))
	first := mustAllow(t, l, s, c)
	for range 4 {
		if !mustAllow(t, l, s, c).OK() {
			t.Fatal("refused before the limit was reached")
		}
	}
	r := mustAllow(t, l, s, c)
	if r.OK() {
		t.Fatalf("sixth call admitted under a limit of 5 per %v", window)
	}
	slice := window / 1000
	want := first.Time().Add(window).Sub(r.Decided())
	if got := r.RetryAfter(); got < want || got > want+slice {
		t.Errorf("RetryAfter = %v, want %v or at most %v more (the first slice, from %v, leaves a window after its latest call)", got, want, slice, first.Time())
	}
	if got := r.Time(); got.Before(first.Time().Add(window)) || got.After(first.Time().Add(window+slice)) {
		t.Errorf("Time = %v, want %v or at most %v later", got, first.Time().Add(window), slice)
	}
}

// testAllOrNothing checks that a decision over several buckets and limits
// records nothing anywhere when one of them refuses.
func testAllOrNothing(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	pool := PerWindow(100, time.Minute)
	search := PerWindow(2, time.Minute)
	hour := PerWindow(1000, time.Hour)

	both := []Demand{charge("pool", 10, pool, hour), charge("search", 1, search)}
	for i := range 2 {
		if r := mustAllow(t, l, s, both...); !r.OK() {
			t.Fatalf("call %d refused", i)
		}
	}
	r := mustAllow(t, l, s, both...)
	if r.OK() {
		t.Fatal("third search admitted past a limit of 2")
	}
	for _, c := range []struct {
		bucket string
		limit  Limit
		want   int64
	}{{"pool", pool, 20}, {"pool", hour, 20}, {"search", search, 2}} {
		if got := mustUsage(t, l, s, c.bucket, c.limit).Used; got != c.want {
			t.Errorf("%s %v: used %d after a refusal, want %d", c.bucket, c.limit, got, c.want)
		}
	}
	if got := r.Remaining(); got != 0 {
		t.Errorf("Remaining = %d, want 0 (search is full)", got)
	}
	if c, ok := r.Constraint(); !ok || c.Bucket != "search" || c.Limit != search || c.Paused {
		t.Errorf("Constraint = %+v, %v; want the search limit", c, ok)
	}
	// The pool alone still has room.
	if r, err := l.Allow(ctx, s, charge("pool", 10, pool, hour)); err != nil || !r.OK() {
		t.Errorf("pool alone: OK=%v err=%v, want admitted", r.OK(), err)
	}
}
