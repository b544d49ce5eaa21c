package quota

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/windowcheck"
)

// testExactness lets many goroutines spend one scope at once, with costs of
// 1 and 100, immediate decisions, holds (some cancelled) and waits, and
// checks every admitted call's instant: no window (T-W, T] may ever hold
// more than U units.
func testExactness(t *testing.T, b *backend) {
	l := b.limiter(t)
	s := scope(t, "s")
	const units = 400
	window := 200 * time.Millisecond
	lim := PerWindow(units, window)

	var (
		mu                       sync.Mutex
		calls                    []windowcheck.Call
		holds, cancels, hundreds int
		refused                  int
		wg                       sync.WaitGroup
	)
	record := func(r *Reservation, cost int64) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, windowcheck.Call{At: r.Time(), Units: cost})
		if cost == 100 {
			hundreds++
		}
	}
	// Run for about seven windows, so that entries expire while holds and
	// new calls arrive.
	end := time.Now().Add(7 * window)
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for i := 0; i < 1000 && time.Now().Before(end); i++ {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				cost := int64(1)
				if rng.IntN(5) == 0 {
					cost = 100
				}
				c := charge("b", cost, lim)
				switch op := rng.IntN(10); {
				case op < 4:
					r, err := l.Allow(context.Background(), s, c)
					if err != nil {
						t.Error(err)
						return
					}
					if r.OK() {
						record(r, cost)
					} else {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				case op < 9:
					maxWait := time.Duration(rng.IntN(150)) * time.Millisecond
					r, err := l.Reserve(context.Background(), s, maxWait, c)
					if err != nil {
						t.Error(err)
						return
					}
					if !r.OK() {
						continue
					}
					if rng.IntN(4) == 0 {
						if err := r.Cancel(context.Background()); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						cancels++
						mu.Unlock()
						continue
					}
					if r.Delay() > 0 {
						mu.Lock()
						holds++
						mu.Unlock()
					}
					record(r, cost)
				default:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(100))*time.Millisecond)
					r, err := l.Wait(ctx, s, c)
					cancel()
					if err == nil {
						record(r, cost)
					}
				}
			}
		})
	}
	wg.Wait()

	most, at := windowcheck.Most(calls, window)
	t.Logf("%d calls admitted (%d of 100 units, %d holds), %d cancelled, %d refused; at most %d units in a window (limit %d)",
		len(calls), hundreds, holds, cancels, refused, most, units)
	if most > units {
		t.Errorf("the window ending %v holds %d units, over the limit of %d", at, most, units)
	}
	if hundreds == 0 || holds == 0 || cancels == 0 || refused == 0 {
		t.Errorf("the run did not exercise every path: %d 100-unit calls, %d holds, %d cancels, %d refusals",
			hundreds, holds, cancels, refused)
	}
	if len(calls) == 0 {
		t.Fatal("nothing was admitted")
	}
	first, last := calls[0].At, calls[0].At
	for _, c := range calls {
		if c.At.Before(first) {
			first = c.At
		}
		if c.At.After(last) {
			last = c.At
		}
	}
	if span := last.Sub(first); span < 4*window {
		t.Errorf("admissions span %v, want several windows of %v so that entries expire during the run", span, window)
	}
	if most < units/2 {
		t.Errorf("at most %d units in a window: the load never came near the limit of %d", most, units)
	}
}
