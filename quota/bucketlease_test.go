package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testBucketLease: a lease on a token bucket is checked as its units at
// the grant and counts, while it runs, the refill its term would bring
// too; it does not jump a hold; its term is at most the time the bucket
// takes to refill; ended early it gives back what was not spent and the
// term left.
func testBucketLease(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(100, 100, 100*time.Second) // a unit a second
	ls, err := l.Lease(ctx, s, charge("b", 60, lim), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Granted() != 60 || ls.ends-ls.at != (10*time.Second).Microseconds() {
		t.Fatalf("granted %d for %dµs, want 60 for 10s", ls.Granted(), ls.ends-ls.at)
	}
	// 60 units and the 10 its term refills.
	if u := mustUsage(t, l, s, "b", lim); u.Used != 70 {
		t.Errorf("used %d with the lease, want 70 (60 and its term's 10)", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 31, lim)); r.OK() || r.RetryAfter() != time.Second {
		t.Errorf("31 units beside the lease: OK=%v RetryAfter=%v, want refused for 1s", r.OK(), r.RetryAfter())
	}
	if r := mustAllow(t, l, s, charge("b", 30, lim)); !r.OK() {
		t.Error("30 units beside the lease refused")
	}
	var refused *RefusedError
	if _, err := l.Lease(ctx, s, charge("b", 1, lim), time.Second); !errors.As(err, &refused) || refused.RetryAfter != time.Second {
		t.Errorf("a lease of an empty bucket: %v, want refused for 1s", err)
	}
	if !ls.Take(20) {
		t.Fatal("Take refused units the lease holds")
	}
	// Ended at +2s having spent 20: 40 units and 8s of term come back.
	clock.Add(2 * time.Second)
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 50 {
		t.Errorf("used %d after the lease ended, want 50 (the 30 and the 20 spent)", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 50, lim)); !r.OK() {
		t.Error("the 50 left refused")
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() {
		t.Error("a unit admitted past the capacity")
	}

	// A call decided after the lease, later than its grant, keeps what it
	// may have assumed: ended unspent, the lease gives back all but the
	// refill between them.
	clock.Add(time.Hour)
	ls, err = l.Lease(ctx, s, charge("b", 50, lim), 20*time.Second)
	if err != nil || ls.Granted() != 50 {
		t.Fatalf("lease of a full bucket: %v", err)
	}
	clock.Add(5 * time.Second)
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Fatal("10 units beside the lease refused")
	}
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
		t.Errorf("used %d after the unspent lease ended, want the 10", u.Used)
	}

	// No lease while a hold waits; none longer than a refill of the whole.
	clock.Add(time.Hour)
	mustAllow(t, l, s, charge("b", 100, lim))
	if r, err := l.Reserve(ctx, s, -1, charge("b", 5, lim)); err != nil || !r.OK() || r.Delay() != 5*time.Second {
		t.Fatalf("hold: %v %v", r.Delay(), err)
	}
	clock.Add(10 * time.Second)
	if _, err := l.Lease(ctx, s, charge("b", 1, lim), time.Second); err != nil {
		t.Fatalf("a lease once the hold is past: %v", err)
	}
	clock.Add(time.Hour)
	ls, err = l.Lease(ctx, s, charge("b", 1, lim), 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ls.ends-ls.at != (100 * time.Second).Microseconds() {
		t.Errorf("a lease of 10h lasts %dµs, want the bucket's refill of 100s", ls.ends-ls.at)
	}
	if left := time.Until(ls.Deadline()); left > 100*time.Second {
		t.Errorf("its deadline in %v, want within 100s", left)
	}
}

// testBucketLeaseWaitsForHold: a lease does not jump a hold on a bucket.
func testBucketLeaseWaitsForHold(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	mustAllow(t, l, s, charge("b", 10, lim))
	if r, err := l.Reserve(ctx, s, -1, charge("b", 5, lim)); err != nil || r.Delay() != 5*time.Second {
		t.Fatalf("hold: %v %v", r.Delay(), err)
	}
	clock.Add(7 * time.Second) // 2 units in the bucket beyond the hold's
	var refused *RefusedError
	if _, err := l.Lease(ctx, s, charge("b", 1, lim), time.Second); err != nil {
		t.Errorf("a lease behind a hold already past: %v", err)
	}
	mustAllow(t, l, s, charge("b", 1, lim))
	if r, err := l.Reserve(ctx, s, -1, charge("b", 5, lim)); err != nil || !r.OK() {
		t.Fatalf("hold: %v", err)
	}
	if _, err := l.Lease(ctx, s, charge("b", 1, lim), time.Second); !errors.As(err, &refused) {
		t.Errorf("a lease while a hold waits: %v, want refused", err)
	}
}

// testBucketLeaseBesideDay: a lease on a token bucket and a daily window
// in one charge, all or nothing, ended early in both.
func testBucketLeaseBesideDay(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(100, 100, 100*time.Second)
	day := PerDay(30, time.UTC)
	ls, err := l.Lease(ctx, s, charge("b", 50, lim, day), 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Granted() != 30 {
		t.Errorf("granted %d, want the day's 30", ls.Granted())
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 34 {
		t.Errorf("bucket used %d, want 34 (30 and the term's 4)", u.Used)
	}
	if u := mustUsage(t, l, s, "b", day); u.Used != 30 {
		t.Errorf("day used %d, want 30", u.Used)
	}
	// The day is full: a lease on both is refused and writes nothing.
	var refused *RefusedError
	if _, err := l.Lease(ctx, s, charge("b", 1, lim, day), time.Second); !errors.As(err, &refused) {
		t.Errorf("a lease past the day: %v, want refused", err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 34 {
		t.Errorf("bucket used %d after a refused lease, want 34", u.Used)
	}
	ls.Take(10)
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
		t.Errorf("bucket used %d after the lease ended at once, want the 10 spent", u.Used)
	}
	if u := mustUsage(t, l, s, "b", day); u.Used != 10 {
		t.Errorf("day used %d after the lease ended, want the 10 spent", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 20, lim, day)); !r.OK() {
		t.Error("the 20 given back refused")
	}
}

// testBucketLeaseProperty: random sequences of calls, holds and leases on
// a bucket, the leases' units spent at random instants of their terms (at
// the grant, along, at the last µs), some ended early: every unit dated at
// the instant it is spent, the units in [T0, T] never exceed
// C + R·(T−T0)/period.
func testBucketLeaseProperty(t *testing.T, b *backend) {
	ctx := context.Background()
	shapes := []struct{ c, r int64 }{{10, 10}, {7, 3}, {100, 1000}, {1, 1}, {60, 7}}
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 2525))
		shape := shapes[seed%uint64(len(shapes))]
		period := time.Duration(10+rng.IntN(50)) * time.Second
		c, r, p := shape.c, shape.r, period.Microseconds()
		lim := TokenBucket(c, r, period)
		refill := c * p / r // µs to refill the whole
		clock := testclock.New(bucketStart)
		l := b.limiter(t, WithClock(clock.Now))
		s := scope(t, strconv.FormatUint(seed, 10))
		type live struct {
			ls   *Lease
			left int64
		}
		var (
			adm    []admission
			leases []*live
			taken  int
		)
		spend := func(x *live, n int64) {
			now := clock.Now().UnixMicro()
			if n <= 0 || now >= x.ls.ends {
				return
			}
			if !x.ls.Take(n) {
				t.Fatalf("seed %d: Take(%d) refused with %d left", seed, n, x.left)
			}
			x.left -= n
			adm = append(adm, admission{now, n})
		}
		for range 200 {
			clock.Add(time.Duration(rng.Int64N(2*refill/c+1)) * time.Microsecond)
			now := clock.Now().UnixMicro()
			n := 1 + rng.Int64N(c)
			switch op := rng.IntN(12); {
			case op < 3:
				if res := mustAllow(t, l, s, charge("b", n, lim)); res.OK() {
					adm = append(adm, admission{res.Time().UnixMicro(), n})
				}
			case op < 4:
				res, err := l.Reserve(ctx, s, time.Duration(rng.Int64N(2*refill))*time.Microsecond, charge("b", n, lim))
				if err != nil {
					t.Fatal(err)
				}
				if res.OK() {
					adm = append(adm, admission{res.Time().UnixMicro(), n})
				}
			case op < 7:
				// Terms of 2s and more: Take's deadline runs on the real clock.
				d := 2*time.Second + time.Duration(rng.Int64N(2*refill))*time.Microsecond
				ls, err := l.Lease(ctx, s, charge("b", n, lim), d)
				var refused *RefusedError
				if errors.As(err, &refused) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if ls.at != now || ls.ends <= now || ls.ends-now > refill {
					t.Fatalf("seed %d: a lease at %d until %d, taken at %d with a refill of %dµs", seed, ls.at, ls.ends, now, refill)
				}
				taken++
				x := &live{ls, ls.Granted()}
				leases = append(leases, x)
				if rng.IntN(3) == 0 {
					spend(x, x.left) // all at the grant
				}
			case op < 10 && len(leases) > 0:
				x := leases[rng.IntN(len(leases))]
				if x.left > 0 {
					if rng.IntN(4) == 0 && x.ls.ends-1 > now {
						clock.Set(time.UnixMicro(x.ls.ends - 1)) // the last µs of its term
					}
					spend(x, 1+rng.Int64N(x.left))
				}
			case len(leases) > 0:
				k := rng.IntN(len(leases))
				if err := leases[k].ls.End(ctx); err != nil {
					t.Fatal(err)
				}
				leases = append(leases[:k], leases[k+1:]...)
			}
		}
		if taken == 0 || len(adm) == 0 {
			t.Fatalf("seed %d: %d leases taken, %d admissions: the sequence tests nothing", seed, taken, len(adm))
		}
		checkBucketBound(t, adm, c, r, p)
	}
}
