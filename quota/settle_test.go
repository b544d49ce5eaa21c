package quota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testSettle: a settled call counts its true cost at its own instant; a
// refund frees room at once, an extra charge counts over the limit, and
// Cancel after Settle gives back what is counted now.
func testSettle(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)

	est := mustAllow(t, l, s, charge("b", 60, lim)) // an estimate of 60
	clock.Add(10 * time.Second)
	if err := est.Settle(ctx, "b", 10); err != nil { // the call cost 10
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
		t.Fatalf("used %d after settling 60 to 10, want 10", u.Used)
	}
	if at, units := openSlice(t, b, l, s, "b", lim); at != t0.UnixMicro() || units != 10 {
		t.Fatalf("the call's slice holds %d units at %d, want 10 at its own instant, %d", units, at, t0.UnixMicro())
	}
	// The 50 refunded are free at once.
	big := mustAllow(t, l, s, charge("b", 90, lim))
	if !big.OK() {
		t.Fatalf("90 units after the refund: refused, retry after %v", big.RetryAfter())
	}
	// The big call truly cost 120: the window is over its limit, and a
	// 1-unit call waits until the first call's 10 leave at t0+1m and then
	// still finds 120 counted: until the big call leaves, at t0+10s+1m.
	if err := big.Settle(ctx, "b", 120); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 130 {
		t.Fatalf("used %d after an extra charge, want 130", u.Used)
	}
	r := mustAllow(t, l, s, charge("b", 1, lim))
	if r.OK() || r.RetryAfter() != time.Minute {
		t.Errorf("1 unit over a window settled over its limit: OK=%v RetryAfter=%v, want refused for 1m", r.OK(), r.RetryAfter())
	}
	// Settling again corrects the settlement; Cancel gives back what is
	// counted now; Settle after Cancel does nothing.
	if err := big.Settle(ctx, "b", 30); err != nil {
		t.Fatal(err)
	}
	if err := big.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := big.Settle(ctx, "b", 99); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
		t.Errorf("used %d after settling to 30 and cancelling, want the first call's 10", u.Used)
	}
	// Once a call's window has passed, there is nothing left to settle.
	clock.Add(2 * time.Minute)
	mustAllow(t, l, s, charge("b", 1, lim)) // trims the old entries
	if err := est.Settle(ctx, "b", 80); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 1 {
		t.Errorf("used %d after settling a call whose window had passed, want 1", u.Used)
	}

	for _, bad := range []struct {
		bucket string
		units  int64
	}{{"b", -1}, {"b", MaxUnits + 1}, {"other", 5}} {
		if err := est.Settle(ctx, bad.bucket, bad.units); !errors.Is(err, ErrInvalid) {
			t.Errorf("Settle(%q, %d) = %v, want ErrInvalid", bad.bucket, bad.units, err)
		}
	}
}

// testSettleSeveralLimits: a settlement reaches every window of its
// bucket, and only that bucket.
func testSettleSeveralLimits(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	minute, hour := PerWindow(100, time.Minute), PerWindow(1000, time.Hour)
	other := PerWindow(10, time.Minute)
	r := mustAllow(t, l, s, charge("tokens", 80, minute, hour), charge("requests", 1, other))
	// The general path's reply (the first decision) and the fast path's
	// (the second) tell each bucket's room.
	second := mustAllow(t, l, s, charge("tokens", 10, minute, hour), charge("requests", 1, other))
	if _, general := r.reply.([]any); !general {
		t.Fatalf("the first decision's reply is %T, want the general path's list", r.reply)
	}
	if _, fast := second.reply.(string); !fast {
		t.Fatalf("the second decision's reply is %T, want the fast path's string", second.reply)
	}
	for _, c := range []struct {
		r      *Reservation
		bucket string
		want   int64
	}{{r, "tokens", 20}, {r, "requests", 9}, {second, "tokens", 10}, {second, "requests", 8}, {r, "nope", -1}} {
		if got := c.r.RemainingOf(c.bucket); got != c.want {
			t.Errorf("RemainingOf(%s) = %d, want %d", c.bucket, got, c.want)
		}
	}
	if err := second.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Settle(ctx, "tokens", 5); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bucket string
		lim    Limit
		want   int64
	}{{"tokens", minute, 5}, {"tokens", hour, 5}, {"requests", other, 1}} {
		if u := mustUsage(t, l, s, c.bucket, c.lim); u.Used != c.want {
			t.Errorf("%s %v: used %d, want %d", c.bucket, c.lim, u.Used, c.want)
		}
	}
}
