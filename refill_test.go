package tollgate

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// A token bucket's reserve, Transit and shares apply to its capacity and
// its refill: tollgate's bucket never holds more, or refills faster, than
// the share of the upstream's it may spend; and Transit takes from the
// capacity what the upstream's bucket refills while a request travels,
// keeping the period.
func TestTokenBucketReserveTransitAndShares(t *testing.T) {
	b := Bucket{Limits: []quota.Limit{quota.TokenBucket(4000, 4000, time.Minute), quota.PerWindow(4000, time.Minute)}, ReservePercent: 5}
	buckets := map[string]Bucket{"requests": b}
	upstream, _, err := configured([]string{"requests"}, buckets)
	if err != nil {
		t.Fatalf("a token bucket and a sliding window of one length: %v, want both (their keys differ)", err)
	}
	a := &limits{buckets: buckets, transit: 60 * time.Millisecond, background: 0.5, localShare: 0.5}
	lims := upstream["requests"]
	// 5% of 4000 kept below: 3800 refilled at 3800 a minute; Transit
	// (60ms) takes 3800·60ms/1m = 3.8, so 4, from the capacity.
	if got, want := a.enforce(b, lims[0], false, false), quota.TokenBucket(3796, 3800, time.Minute); got != want {
		t.Errorf("the bucket enforced: %v, want %v", got, want)
	}
	if got, want := a.enforce(b, lims[1], false, false), quota.PerWindow(3800, time.Minute+60*time.Millisecond); got != want {
		t.Errorf("the window enforced: %v, want %v", got, want)
	}
	// Half of 3800 refilled at half of 3800; Transit takes 1900·60ms/1m =
	// 1.9, so 2, from the capacity.
	for _, share := range []struct {
		name              string
		background, local bool
	}{{"background", true, false}, {"FailLocal", false, true}} {
		if got, want := a.enforce(b, lims[0], share.background, share.local), quota.TokenBucket(1898, 1900, time.Minute); got != want {
			t.Errorf("the %s share of the bucket: %v, want %v", share.name, got, want)
		}
	}
	if _, err := (Bucket{Limits: []quota.Limit{quota.TokenBucket(100, 1, time.Minute)}, ReserveUnits: 1}).check("b"); err == nil {
		t.Error("a reserve that leaves a bucket no refill: no error")
	}
}

// TestTokenBucketTransit: requests admitted by a bucket that enforce
// made (tollgate's, Transit below the upstream's) and reaching the
// upstream up to Transit late, in any order, never find the upstream's
// bucket short. The upstream is modelled as its bucket: its level,
// refilled at its rate, capped at its capacity, spent by each arrival in
// arrival order.
func TestTokenBucketTransit(t *testing.T) {
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	const capacity, refill = 20, 20
	period, transit := 2*time.Second, 300*time.Millisecond
	upstream := quota.TokenBucket(capacity, refill, period)
	enforced := (&limits{transit: transit}).enforce(Bucket{}, upstream, false, false)
	if want := quota.TokenBucket(17, 20, period); enforced != want {
		t.Fatalf("enforced: %v, want %v (20·300ms/2s = 3 units less)", enforced, want)
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 26))
		now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
		lim, err := quota.New(rdb, quota.WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		scope := "transit-" + strconv.FormatUint(seed, 10)
		type arrival struct {
			at    time.Time
			units int64
		}
		var arrivals []arrival
		for range 300 {
			now = now.Add(time.Duration(rng.Int64N(int64(120 * time.Millisecond))))
			n := 1 + rng.Int64N(4)
			r, err := lim.Allow(context.Background(), scope, quota.Demand{Bucket: "b", Units: n, Limits: []quota.Limit{enforced}})
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() {
				arrivals = append(arrivals, arrival{r.Time().Add(time.Duration(rng.Int64N(int64(transit) + 1))), n})
			}
		}
		slices.SortStableFunc(arrivals, func(a, b arrival) int { return a.at.Compare(b.at) })
		// The upstream's level, in units times µs of the period: exact.
		p := period.Microseconds()
		level, last := int64(capacity)*p, arrivals[0].at
		for i, a := range arrivals {
			level = min(level+a.at.Sub(last).Microseconds()*refill, capacity*p)
			last = a.at
			if level < a.units*p {
				t.Fatalf("seed %d: arrival %d (%d units at %v) finds the upstream's bucket at %.2f units",
					seed, i, a.units, a.at, float64(level)/float64(p))
			}
			level -= a.units * p
		}
	}
}

// TestLearnedTokenBucketPastTheEngine: a learned capacity the engine
// cannot hold (past quota.MaxRefillSpan over its period in µs) is kept at
// the most it holds, its refill the learned one, and the limit is valid;
// one below it keeps the learned capacity, less Transit's refill.
func TestLearnedTokenBucketPastTheEngine(t *testing.T) {
	b := Bucket{Limits: []quota.Limit{quota.TokenBucket(0, 1, time.Minute)}, Follows: "tokens"}
	a := &limits{buckets: map[string]Bucket{"tokens": b}, transit: 50 * time.Millisecond, background: 0.5,
		announced: map[string]string{"tokens": "tokens"}}
	d := a.decider(nil, map[string][]quota.Limit{"tokens": b.Limits}, nil, false)
	for _, c := range []struct {
		learned int64
		want    quota.Limit
	}{
		{100_000_000, quota.TokenBucket(quota.MaxRefillSpan/60_000_000, 100_000_000, time.Minute)},
		{30_000_000, quota.TokenBucket(30_000_000-25_000, 30_000_000, time.Minute)}, // 30M·50ms/1m = 25000
	} {
		a.learned.Update(learn.Key{Scope: "s", Bucket: "tokens"}, func(l *learn.Learned) { l.Limit = c.learned })
		lims, gated := a.of(d, "s", "tokens", false)
		if gated || len(lims) != 1 || lims[0] != c.want || lims[0].Validate() != nil {
			t.Errorf("learned %d: %v (gated %v), want %v, valid", c.learned, lims, gated, c.want)
		}
	}
}
