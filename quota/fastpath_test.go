package quota

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// counted returns a client to the backend's Redis that counts the paths
// decisions take.
func (b *backend) counted(t *testing.T) (redis.UniversalClient, *decisionWatch) {
	t.Helper()
	var c redis.UniversalClient
	src := b.client
	if b.user != nil {
		src = b.user
	}
	switch bc := src.(type) {
	case *redis.ClusterClient:
		o := *bc.Options()
		c = redis.NewClusterClient(&o)
	case *redis.Client:
		o := *bc.Options()
		o.PushNotificationProcessor = nil // the original's; each client registers its own
		c = redis.NewClient(&o)
	default:
		t.Fatalf("unknown client %T", src)
	}
	t.Cleanup(func() { c.Close() })
	p := &decisionWatch{}
	c.AddHook(p)
	return c, p
}

// testFastPathAgrees checks fast.lua against reserve.lua. fast.lua decides
// the common case with code of its own, so a run of random calls must get
// the same answers with it as without it. A clock before 2001 gives
// 15-digit instants, which fast.lua leaves to reserve.lua: the same calls
// dated 27 years earlier take the general path every time.
func testFastPathAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	pacific := mustLoad(t, "America/Los_Angeles")
	// Both runs start shortly before a standard-time midnight, so that their
	// calendar days end at the same offset from the start.
	starts := [2]time.Time{
		time.Date(2026, 11, 21, 23, 59, 30, 0, pacific),
		time.Date(1999, 11, 21, 23, 59, 30, 0, pacific),
	}
	var clocks [2]*testclock.Clock
	var limiters [2]*Limiter
	var paths [2]*decisionWatch
	for i, start := range starts {
		var c redis.UniversalClient
		c, paths[i] = b.counted(t)
		clocks[i] = testclock.New(start)
		limiters[i] = mustNew(t, c, WithClock(clocks[i].Now))
	}
	// Calls ask for 22 units/s on average: more than some limits allow, so
	// that the run has admissions, refusals and holds.
	one := []Demand{charge("one", 1, PerWindow(150, 10*time.Second))}
	two := []Demand{charge("two", 1, PerDay(1200, pacific), PerWindow(60, 5*time.Second))}
	both := []Demand{one[0], two[0]}
	sets := [][]Demand{one, two, both}

	rng := rand.New(rand.NewPCG(6, 1))
	var last [2]*Reservation
	for step := range 400 {
		d := time.Duration(rng.IntN(400)) * time.Millisecond
		set := sets[rng.IntN(len(sets))]
		cost := int64(1 + rng.IntN(8))
		charges := make([]Demand, len(set))
		for i, c := range set {
			charges[i] = charge(c.Bucket, cost, c.Limits...)
		}
		hold := rng.IntN(4) == 0
		cancel := rng.IntN(12) == 0

		var got [2]*Reservation
		for i, l := range limiters {
			s := scope(t, starts[i].Format("2006"))
			clocks[i].Add(d)
			if cancel && last[i] != nil {
				if err := last[i].Cancel(ctx); err != nil {
					t.Fatalf("step %d: Cancel: %v", step, err)
				}
			}
			var err error
			if hold {
				got[i], err = l.Reserve(ctx, s, 3*time.Second, charges...)
			} else {
				got[i], err = l.Allow(ctx, s, charges...)
			}
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			last[i] = got[i]
		}
		f, g := got[0], got[1]
		if f.OK() != g.OK() || f.Time().Sub(starts[0]) != g.Time().Sub(starts[1]) || f.Remaining() != g.Remaining() {
			t.Fatalf("step %d (cost %d over %d charges, hold %v): fast path said ok=%v at +%v remaining %d; general path ok=%v at +%v remaining %d",
				step, cost, len(charges), hold,
				f.OK(), f.Time().Sub(starts[0]), f.Remaining(), g.OK(), g.Time().Sub(starts[1]), g.Remaining())
		}
	}
	if n := paths[0].fast.Load(); n < 100 {
		t.Errorf("fast.lua decided %d of 400 calls on a 2026 clock, want most of the admissions", n)
	}
	if n := paths[1].fast.Load(); n != 0 {
		t.Errorf("fast.lua decided %d calls on a 1999 clock, want none", n)
	}
	t.Logf("fast.lua decided %d calls, reserve.lua %d", paths[0].fast.Load(), paths[0].general.Load())
}
