package quota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testCancel checks that Cancel gives a hold's units back, and an admitted
// call's too (for a call that never reached the upstream), exactly once.
func testCancel(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(10, time.Minute)
	now := mustAllow(t, l, s, charge("b", 6, lim))
	hold, err := l.Reserve(ctx, s, -1, charge("b", 6, lim))
	if err != nil || !hold.OK() || hold.Delay() < 50*time.Second {
		t.Fatalf("Reserve: OK=%v Delay=%v err=%v, want a hold about a minute ahead", hold.OK(), hold.Delay(), err)
	}
	u := mustUsage(t, l, s, "b", lim)
	if u.Used != 12 || u.Held != 6 {
		t.Errorf("with a hold: used %d held %d, want 12 and 6", u.Used, u.Held)
	}
	for range 2 { // the second Cancel must not give anything back twice
		if err := hold.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 6 || u.Held != 0 {
		t.Errorf("after cancelling the hold: used %d held %d, want 6 and 0", u.Used, u.Held)
	}
	if err := now.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 0 {
		t.Errorf("after cancelling both: used %d, want 0", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Error("the whole limit refused after every call was cancelled")
	}
}

// testWaitDeadline checks that Wait fails at once, with the RetryAfter, when
// the cost cannot fit before the context's deadline, and records nothing.
func testWaitDeadline(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(1, 10*time.Second)
	mustAllow(t, l, s, charge("b", 1, lim))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := l.Wait(ctx, s, charge("b", 1, lim))
	var refused *RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Wait = %v, want a *RefusedError", err)
	}
	if ctx.Err() != nil {
		t.Error("Wait slept until the deadline instead of failing at once")
	}
	if refused.RetryAfter < 9*time.Second || refused.RetryAfter > 10*time.Second || refused.RetryAfter != r.RetryAfter() {
		t.Errorf("RetryAfter = %v (reservation %v), want about 10s", refused.RetryAfter, r.RetryAfter())
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 1 {
		t.Errorf("used %d, want 1: the refused Wait must record nothing", u.Used)
	}
}

// testWaitCancelled checks that a Wait whose context ends while it sleeps
// returns promptly and gives its hold back.
func testWaitCancelled(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(1, 10*time.Second)
	mustAllow(t, l, s, charge("b", 1, lim))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Wait(ctx, s, charge("b", 1, lim))
		done <- err
	}()
	// The hold shows up in the usage once Wait sleeps on it.
	for i := 0; mustUsage(t, l, s, "b", lim).Held == 0; i++ {
		if i == 1000 {
			t.Fatal("Wait never took a hold")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after its context was cancelled")
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 1 || u.Held != 0 {
		t.Errorf("after the cancelled Wait: used %d held %d, want 1 and 0", u.Used, u.Held)
	}
}

// testPause checks that a pause stops a bucket, or a whole scope, in every
// limiter sharing the Redis, and that RetryAfter ends with it.
func testPause(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	other := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)

	if err := l.Pause(ctx, s, "search", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	r := mustAllow(t, other, s, charge("pool", 1, lim), charge("search", 1, lim))
	if r.OK() || r.RetryAfter() != 2*time.Second {
		t.Errorf("paused bucket: OK=%v RetryAfter=%v, want refused for 2s", r.OK(), r.RetryAfter())
	}
	if c, ok := r.Constraint(); !ok || c != (Constraint{Bucket: "search", Paused: true}) {
		t.Errorf("Constraint = %+v, %v; want the search pause", c, ok)
	}
	if r := mustAllow(t, other, s, charge("pool", 1, lim)); !r.OK() {
		t.Error("a bucket that is not paused was refused")
	}
	if u := mustUsage(t, other, s, "search", lim); !u.PausedUntil.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("PausedUntil = %v, want %v", u.PausedUntil, t0.Add(2*time.Second))
	}
	// A waiter is held until the pause ends.
	r, err := other.Reserve(ctx, s, time.Minute, charge("search", 1, lim))
	if err != nil || !r.OK() || r.Delay() != 2*time.Second {
		t.Errorf("Reserve in a pause: OK=%v Delay=%v err=%v, want a 2s hold", r.OK(), r.Delay(), err)
	}
	// A shorter pause does not shorten it; a scope pause covers every bucket.
	if err := l.Pause(ctx, s, "search", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Pause(ctx, s, "", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r = mustAllow(t, other, s, charge("pool", 1, lim))
	if r.OK() || r.RetryAfter() != 5*time.Second {
		t.Errorf("paused scope: OK=%v RetryAfter=%v, want refused for 5s", r.OK(), r.RetryAfter())
	}
	if c, ok := r.Constraint(); !ok || c != (Constraint{Paused: true}) {
		t.Errorf("Constraint = %+v, %v; want the scope's pause", c, ok)
	}
	clock.Add(5 * time.Second)
	if r := mustAllow(t, other, s, charge("pool", 1, lim)); !r.OK() {
		t.Errorf("after the pause: refused with %v", r.RetryAfter())
	}
}

// testRecord checks that units spent without the limiter's say are
// recorded past the limit, and that later callers then wait them out.
func testRecord(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(10, time.Minute)
	mustAllow(t, l, s, charge("b", 8, lim))
	clock.Add(10 * time.Second)
	if err := l.Record(ctx, s, charge("b", 7, lim)); err != nil {
		t.Fatal(err)
	}
	if at, units := openSlice(t, b, l, s, "b", lim); at != clock.Now().UnixMicro() || units != 7 {
		t.Fatalf("the open slice holds %d units at %d, want the 7 recorded now, at %d", units, at, clock.Now().UnixMicro())
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 15 {
		t.Errorf("used %d after recording 7 on top of 8, want 15", u.Used)
	}
	// 15 of 10 are counted: a 1-unit call needs 6 units to leave, which
	// the first entry's 8 do a minute after t0, 50s from now.
	r := mustAllow(t, l, s, charge("b", 1, lim))
	if r.OK() || r.RetryAfter() != 50*time.Second {
		t.Errorf("after Record: OK=%v RetryAfter=%v, want refused for 50s", r.OK(), r.RetryAfter())
	}
	if err := l.Record(ctx, s, charge("b", 11, lim)); !errors.Is(err, ErrCostExceedsLimit) {
		t.Errorf("Record of more than the limit = %v, want ErrCostExceedsLimit", err)
	}
}
