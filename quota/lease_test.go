package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/windowcheck"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testLease checks a lease's life on an injected clock: it takes what fits
// up to what was asked, counts at once, lets later callers through while it
// has room, gives back what was not spent, and dates what was at its end.
func testLease(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, 10*time.Second)
	mustAllow(t, l, s, charge("b", 40, lim))

	ls, err := l.Lease(ctx, s, charge("b", 80, lim), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Granted() != 60 {
		t.Errorf("granted %d, want the 60 that fit of the 80 asked", ls.Granted())
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 100 {
		t.Errorf("used %d with the lease, want 100: it counts from the moment it is taken", u.Used)
	}
	// Spending from it asks nothing of Redis; the window is full for others.
	for range 6 {
		if !ls.Take(10) {
			t.Fatal("Take refused units the lease holds")
		}
	}
	if ls.Take(1) {
		t.Error("Take spent past the lease")
	}
	// A waiter is placed by what leaves first: the 40 units of t0 at +10s,
	// not behind the lease's end.
	r, err := l.Reserve(ctx, s, time.Minute, charge("b", 30, lim))
	if err != nil || !r.OK() || !r.Time().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("Reserve behind the lease: OK=%v Time=%v err=%v, want a hold at +10s", r.OK(), r.Time(), err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}

	// Ended early at +2s having spent 60 of 60: those stay until +12s.
	clock.Set(t0.Add(2 * time.Second))
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(11 * time.Second)) // the 40 of t0 have left
	if u := mustUsage(t, l, s, "b", lim); u.Used != 60 {
		t.Errorf("at +11s: used %d, want the lease's 60 spent", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 41, lim)); r.OK() || r.RetryAfter() != time.Second {
		t.Errorf("41 units at +11s: OK=%v RetryAfter=%v, want refused until the lease's spending leaves at +12s", r.OK(), r.RetryAfter())
	}
	clock.Set(t0.Add(12 * time.Second))
	if r := mustAllow(t, l, s, charge("b", 100, lim)); !r.OK() {
		t.Errorf("the whole limit at +12s: refused for %v", r.RetryAfter())
	}
}

// testLeaseGivesBackUnspent: a lease ended having spent part of its units
// gives the rest back at once.
func testLeaseGivesBackUnspent(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)
	ls, err := l.Lease(ctx, s, charge("b", 100, lim), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ls.Take(20)
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	if ls.Take(1) {
		t.Error("Take spent from an ended lease")
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 20 {
		t.Errorf("used %d after ending the lease, want the 20 spent", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 80, lim)); !r.OK() {
		t.Error("the units the lease gave back were not free")
	}
}

// testLeaseRespectsQueueAndDay: no lease while a hold waits, and none that
// outlives its calendar day.
func testLeaseRespectsQueueAndDay(t *testing.T, b *backend) {
	ctx := context.Background()
	la := mustLoad(t, "America/Los_Angeles")
	t0 := time.Date(2026, 11, 1, 23, 59, 0, 0, la)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	day := PerDay(100, la)
	ls, err := l.Lease(ctx, s, charge("b", 10, day), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(ls.Deadline()); left > time.Minute+time.Second {
		t.Errorf("a lease taken a minute before midnight lasts %v, want it ended by midnight", left)
	}
	minute := PerWindow(10, time.Minute)
	mustAllow(t, l, s, charge("m", 10, minute))
	if r, err := l.Reserve(ctx, s, time.Hour, charge("m", 5, minute)); err != nil || r.Delay() != time.Minute {
		t.Fatalf("hold: %v %v", r.Delay(), err)
	}
	_, err = l.Lease(ctx, s, charge("m", 5, minute), time.Second)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.RetryAfter < time.Minute {
		t.Errorf("lease while a hold waits: %v, want refused until after the hold", err)
	}
}

// testExactWithLeases spends one scope from goroutines that lease blocks
// and goroutines that ask call by call, and checks every unit's instant:
// no window may ever hold more than the limit.
func testExactWithLeases(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	const units = 300
	window := 200 * time.Millisecond
	lim := PerWindow(units, window)
	var (
		mu     sync.Mutex
		calls  []windowcheck.Call
		leased int
		wg     sync.WaitGroup
	)
	record := func(at time.Time, cost int64) {
		mu.Lock()
		calls = append(calls, windowcheck.Call{At: at, Units: cost})
		mu.Unlock()
	}
	end := time.Now().Add(6 * window)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 2000 && time.Now().Before(end); i++ {
				cost := int64(1 + rng.IntN(3))
				if g%2 == 0 { // a leasing process
					ls, err := l.Lease(context.Background(), s, charge("b", 40, lim), 30*time.Millisecond)
					if err != nil {
						time.Sleep(time.Millisecond)
						continue
					}
					mu.Lock()
					leased++
					mu.Unlock()
					for ls.Take(cost) {
						record(time.Now(), cost) // the instant it is spent
						time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
					}
					if err := ls.End(context.Background()); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				r, err := l.Allow(context.Background(), s, charge("b", cost, lim))
				if err != nil {
					t.Error(err)
					return
				}
				if r.OK() {
					record(r.Time(), cost)
				}
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	most, at := windowcheck.Most(calls, window)
	t.Logf("%d calls, %d leases; at most %d units in a window (limit %d)", len(calls), leased, most, units)
	if most > units {
		t.Errorf("the window ending %v holds %d units, over the limit of %d", at, most, units)
	}
	if leased == 0 || most < units/2 {
		t.Errorf("%d leases, at most %d units in a window: the run did not load the limit", leased, most)
	}
}
