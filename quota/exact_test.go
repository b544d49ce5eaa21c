package quota

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// admitted is one call the limiter admitted: its instant and cost.
type admitted struct {
	at   time.Time
	cost int64
}

// maxInWindow returns the largest number of units dated within any window
// (T-w, T]. The maximum is reached at some entry's instant, so checking the
// window ending at each entry suffices.
func maxInWindow(calls []admitted, w time.Duration) (most int64, at time.Time) {
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b admitted) int { return a.at.Compare(b.at) })
	var sum int64
	lo := 0
	for hi := range calls {
		sum += calls[hi].cost
		for !calls[lo].at.After(calls[hi].at.Add(-w)) {
			sum -= calls[lo].cost
			lo++
		}
		if sum > most {
			most, at = sum, calls[hi].at
		}
	}
	return most, at
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	calls := []admitted{
		{t0, 5}, {t0.Add(time.Second), 3}, {t0.Add(2 * time.Second), 4}, {t0.Add(2500 * time.Millisecond), 1},
	}
	if got, _ := maxInWindow(calls, 2*time.Second); got != 8 {
		t.Errorf("max over 2s windows = %d, want 8 ((+0.5s,+2.5s] holds 3+4+1)", got)
	}
	if got, _ := maxInWindow(calls, 2*time.Second+time.Nanosecond); got != 12 {
		t.Errorf("max over 2s+1ns windows = %d, want 12", got)
	}
}

// testExactness lets many goroutines spend one scope at once, with costs of
// 1 and 100, immediate decisions, holds (some cancelled) and waits, and
// checks every admitted call's instant: no window (T-W, T] may ever hold
// more than U units.
func testExactness(t *testing.T, b *backend) {
	l := b.limiter()
	s := scope(t, "s")
	const units = 400
	window := 200 * time.Millisecond
	lim := PerWindow(units, window)

	var (
		mu                       sync.Mutex
		calls                    []admitted
		holds, cancels, hundreds int
		refused                  int
		wg                       sync.WaitGroup
	)
	record := func(r *Reservation, cost int64) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, admitted{r.Time(), cost})
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

	most, at := maxInWindow(calls, window)
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
	first, last := calls[0].at, calls[0].at
	for _, c := range calls {
		if c.at.Before(first) {
			first = c.at
		}
		if c.at.After(last) {
			last = c.at
		}
	}
	if span := last.Sub(first); span < 4*window {
		t.Errorf("admissions span %v, want several windows of %v so that entries expire during the run", span, window)
	}
	if most < units/2 {
		t.Errorf("at most %d units in a window: the load never came near the limit of %d", most, units)
	}
}
