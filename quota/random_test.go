package quota

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// testRandomOperationsKeepTheLimit: a random sequence of decisions now and
// holds, holds cancelled before they are due, and refunds settled after
// the fact, on a hand-moved clock, against a short and a long sliding
// limit and a calendar day: no window of any of them ever holds more than
// its limit, counting each call at its admission instant with what it
// finally cost. The calls are many per slice, so slices hold many calls.
func testRandomOperationsKeepTheLimit(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 23, 58, 0, 0, time.UTC) // a midnight UTC within the run
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	short, long := PerWindow(60, time.Second), PerWindow(900, 30*time.Second)
	day := PerDay(20000, time.UTC)
	rng := rand.New(rand.NewPCG(5, 8))
	type call struct {
		r     *Reservation
		units int64
	}
	var calls []call
	var holds []int // calls still waiting, by index
	refused := 0
	for range 4000 {
		clock.Add(time.Duration(rng.IntN(40)) * time.Millisecond)
		switch op := rng.IntN(10); {
		case op < 6: // decide, now or as a hold
			units := 1 + rng.Int64N(9)
			maxWait := time.Duration(0)
			if rng.IntN(2) == 0 {
				maxWait = 2 * time.Second
			}
			r, err := l.Reserve(ctx, s, maxWait, charge("b", units, short, long, day))
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK() {
				refused++
				continue
			}
			calls = append(calls, call{r, units})
			if r.Delay() > 0 {
				holds = append(holds, len(calls)-1)
			}
		case op < 8 && len(holds) > 0: // a hold given back before it is due
			k := rng.IntN(len(holds))
			c := &calls[holds[k]]
			holds = append(holds[:k], holds[k+1:]...)
			if !c.r.Time().After(clock.Now()) {
				continue // due already: the call was made
			}
			if err := c.r.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			c.units = 0
		case len(calls) > 0: // a refund: the call cost less than charged
			c := &calls[rng.IntN(len(calls))]
			if c.units == 0 {
				continue
			}
			c.units = rng.Int64N(c.units + 1)
			if err := c.r.Settle(ctx, "b", c.units); err != nil {
				t.Fatal(err)
			}
		}
	}
	var counted []windowcheck.Call
	var byDay = map[time.Time]int64{}
	for _, c := range calls {
		counted = append(counted, windowcheck.Call{At: c.r.Time(), Units: c.units})
		byDay[c.r.Time().Truncate(24*time.Hour)] += c.units
	}
	for _, lim := range []Limit{short, long} {
		if most, at := windowcheck.Most(counted, lim.Window); most > lim.Units {
			t.Errorf("the window of %v ending %v held %d units, over its limit", lim, at, most)
		}
	}
	for d, units := range byDay {
		if units > day.Units {
			t.Errorf("the day %v held %d units, over its limit of %d", d, units, day.Units)
		}
	}
	if len(calls) < 500 || refused < 100 {
		t.Errorf("%d calls admitted, %d refused: the run did not reach the limits", len(calls), refused)
	}
}
