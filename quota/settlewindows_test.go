package quota

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// leanWatch counts the settlements settlewindows.lua took itself: the test
// script (leanOrGeneral, sent by its hash) replies with a table where it
// did, a number where it fell through to settle.lua.
type leanWatch struct{ lean, general atomic.Int64 }

func (w *leanWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *leanWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok && err == nil && len(c.Args()) > 1 && c.Args()[1] == leanOrGeneral.Hash() {
			switch c.Val().(type) {
			case []any:
				w.lean.Add(1)
			case int64:
				w.general.Add(1)
			}
		}
		return err
	}
}

func (w *leanWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// leanOrGeneral is settleScript's lean form (settlewindows.lua, then
// settle.lua through log.lua) but that settlewindows.lua runs as a
// function, whose reply it wraps in a table: the test sees which part
// settled, and the state written is the lean form's.
var leanOrGeneral = newScript(clockPart + binaryPart +
	"local function settle_windows()\n" + settleWindowsPart + "\nend\n" +
	"local lean_reply = settle_windows()\nif lean_reply then return {lean_reply} end\n" +
	windowParts + settlePart)

// testSettleWindowsAgrees checks settlewindows.lua against the general
// code: a run of random calls on a sliding window, a calendar day beside a
// sliding window, and a fixed window (holds among them, the clock running
// over a Pacific midnight and slices closing between decisions and
// settlements), settled up or down, settled again or cancelled at random,
// leaves every window's meta and log the same byte for byte, and every
// decision the same, whichever settles them.
func testSettleWindowsAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	pacific := mustLoad(t, "America/Los_Angeles")
	start := time.Date(2026, 8, 2, 23, 55, 0, 0, pacific)
	clock := testclock.New(start)
	c, _ := b.counted(t)
	watch := &leanWatch{}
	c.AddHook(watch)
	l := mustNew(t, c, WithClock(clock.Now))
	scopes := [2]string{scope(t, "lean"), scope(t, "general")}
	scripts := [2]*redis.Script{leanOrGeneral, generalSettle}
	minute := PerWindow(2500, time.Minute)
	day, short := PerDay(20000, pacific), PerWindow(900, 10*time.Second)
	fixed := PerFixedWindow(3000, time.Minute, start.Add(20*time.Second))
	buckets := []struct {
		bucket string
		lims   []Limit
	}{{"minute", []Limit{minute}}, {"day", []Limit{day, short}}, {"fixed", []Limit{fixed}}}
	rng := rand.New(rand.NewPCG(43, 11))
	var held [][2]*Reservation
	settlements := 0
	for step := range 600 {
		clock.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if rng.IntN(2) == 0 || len(held) == 0 {
			var charges []Demand
			for _, x := range buckets {
				if rng.IntN(3) > 0 {
					charges = append(charges, charge(x.bucket, int64(1+rng.IntN(200)), x.lims...))
				}
			}
			if len(charges) == 0 {
				continue
			}
			wait := time.Duration(rng.IntN(3)/2) * 30 * time.Second
			var pair [2]*Reservation
			for k, s := range scopes {
				r, err := l.Reserve(ctx, s, wait, charges...)
				if err != nil {
					t.Fatal(err)
				}
				pair[k] = r
			}
			if pair[0].OK() != pair[1].OK() || pair[0].Time() != pair[1].Time() {
				t.Fatalf("step %d: decisions differ: %v at %v against %v at %v", step, pair[0].OK(), pair[0].Time(), pair[1].OK(), pair[1].Time())
			}
			if pair[0].OK() {
				held = append(held, pair)
			}
		} else {
			// The latest reservations most often: a settlement follows its
			// answer, seconds after the decision.
			j := len(held) - 1 - rng.IntN(min(len(held), 4))
			if rng.IntN(5) == 0 {
				j = rng.IntN(len(held))
			}
			pair := held[j]
			units := map[string]int64{}
			for _, ch := range pair[0].charges {
				if rng.IntN(3) > 0 {
					units[ch.Bucket] = int64(rng.IntN(2 * int(ch.Units+1)))
				}
			}
			cancel := rng.IntN(10) == 0
			for k := range scopes {
				var err error
				if cancel {
					err = pair[k].Cancel(ctx)
				} else {
					err = pair[k].settle(ctx, scripts[k], units)
				}
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			if !cancel {
				settlements++
			}
		}
		for _, x := range buckets {
			for _, lim := range x.lims {
				var states [2]string
				for k, s := range scopes {
					w := l.window(s, x.bucket, lim)
					m, err := b.client.Get(ctx, w.meta).Result()
					if err != nil && err != redis.Nil {
						t.Fatal(err)
					}
					entries, err := b.client.LRange(ctx, w.log, 0, -1).Result()
					if err != nil {
						t.Fatal(err)
					}
					states[k] = m + "|" + string(appendAll(entries))
				}
				if states[0] != states[1] {
					t.Fatalf("step %d: %s %v: meta and log %x settled by settlewindows.lua, want %x as by the general code", step, x.bucket, lim, states[0], states[1])
				}
			}
		}
	}
	lean, general := watch.lean.Load(), watch.general.Load()
	t.Logf("%d settlements: settlewindows.lua took %d calls, settle.lua %d", settlements, lean, general)
	if lean < (lean+general)/3 {
		t.Errorf("settlewindows.lua settled %d of %d calls, want at least a third", lean, lean+general)
	}
	if general == 0 {
		t.Errorf("settle.lua settled none of %d calls: the run never left the common case", lean)
	}
}

// appendAll joins a log's entries, each after a separator.
func appendAll(entries []string) []byte {
	var b []byte
	for _, e := range entries {
		b = append(b, ';')
		b = append(b, e...)
	}
	return b
}
