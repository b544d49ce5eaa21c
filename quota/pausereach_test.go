package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testPauseReachesTheMetas: fast.lua reads no pause key, so a pause must
// reach it through the metas: a pause set while windows are decided on
// the fast path stops them at once (a bucket's pause its own windows, the
// scope's pause all), by Pause and by PauseBecause; a window whose meta is
// made during a pause, by a decision or by Record, is stopped too; a
// window of another bucket goes on on the fast path; and after a resume
// (or the pause's end) the windows return to the fast path.
func testPauseReachesTheMetas(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	c, watch := b.counted(t)
	l := mustNew(t, c, WithClock(clock.Now))
	s := scope(t, "s")
	minute, hour := PerWindow(1000, time.Minute), PerWindow(1000, time.Hour)
	a, other := charge("a", 1, minute, hour), charge("o", 1, minute)
	fast := func(what string, ch Demand, want bool) {
		t.Helper()
		clock.Add(100 * time.Millisecond)
		before := watch.fast.Load()
		r := mustAllow(t, l, s, ch)
		if got := watch.fast.Load() > before; got != want {
			t.Errorf("%s: decided on the fast path %v, want %v", what, got, want)
		}
		if r.OK() == (ch.Bucket == "a" && paused(t, l, s, clock.Now())) {
			t.Errorf("%s: admitted %v while bucket a paused %v", what, r.OK(), paused(t, l, s, clock.Now()))
		}
	}
	for range 3 {
		mustAllow(t, l, s, a)
		mustAllow(t, l, s, other)
	}
	fast("before any pause", a, true)
	fast("another bucket", other, true)

	if err := l.Pause(ctx, s, "a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	fast("a paused by Pause", a, false)
	fast("another bucket while a is paused", other, true)
	if n, err := l.resume(ctx, s, "a"); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	fast("a resumed: the general path clears the pause", a, false)
	fast("a resumed", a, true)

	if _, err := l.PauseBecause(ctx, s, "", 10*time.Second, "deploy"); err != nil {
		t.Fatal(err)
	}
	fast("the scope paused by PauseBecause", a, false)
	// The scope's pause stops every bucket: a refusal for "o" too.
	clock.Add(100 * time.Millisecond)
	if r := mustAllow(t, l, s, other); r.OK() {
		t.Error("another bucket admitted while the scope is paused")
	}
	// Windows made during the pause: by a decision, and by Record.
	day := charge("a", 1, PerDay(1000, time.UTC))
	clock.Add(100 * time.Millisecond)
	if r := mustAllow(t, l, s, day); r.OK() {
		t.Error("a new window admitted while the scope is paused")
	}
	fresh := charge("n", 1, minute)
	if err := l.Record(ctx, s, fresh); err != nil {
		t.Fatal(err)
	}
	clock.Add(100 * time.Millisecond)
	before := watch.fast.Load()
	if r := mustAllow(t, l, s, fresh); r.OK() || watch.fast.Load() > before {
		t.Errorf("a window Record made during the pause: admitted %v, on the fast path %v", r.OK(), watch.fast.Load() > before)
	}
	// The pause ends by itself: the metas' pause field is then past.
	clock.Add(10 * time.Second)
	fast("after the scope's pause", other, true)
}

// paused reports whether bucket a of scope s is paused at now, by the
// bucket's or the scope's pause.
func paused(t *testing.T, l *Limiter, s string, now time.Time) bool {
	t.Helper()
	for _, bucket := range []string{"a", ""} {
		p, err := l.PauseOf(context.Background(), s, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Until.IsZero() && p.Until.After(now) {
			return true
		}
	}
	return false
}
