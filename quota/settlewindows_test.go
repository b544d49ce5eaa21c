package quota

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// leanWatch counts the settlements settlewindows.lua took itself: the test
// script (leanOrGeneral, sent by its hash or source) replies with a table where it
// did, a number where it fell through to settle.lua.
type leanWatch struct{ lean, general atomic.Int64 }

func (w *leanWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *leanWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok && err == nil && len(c.Args()) > 1 &&
			(c.Args()[1] == leanOrGeneral.Hash() || c.Args()[1] == leanOrGeneralSource) {
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
var (
	leanOrGeneralSource = clockPart + binaryPart +
		"local function settle_windows()\n" + settleWindowsPart + "\nend\n" +
		"local lean_reply = settle_windows()\nif lean_reply then return {lean_reply} end\n" +
		windowParts + settlePart
	leanOrGeneral = newScript(leanOrGeneralSource)
)

// testSettleWindowsAgrees checks settlewindows.lua against the general
// code: a run of random calls on a sliding window, a calendar day beside a
// sliding window, and a fixed window (holds among them, the clock running
// over a Pacific midnight and slices closing between decisions and
// settlements), settled up or down, settled again or cancelled at random,
// leaves every window's meta and log the same byte for byte, and every
// decision the same, whichever settles them. Pauses come and go.
func testSettleWindowsAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	pacific := mustLoad(t, "America/Los_Angeles")
	start := time.Date(2026, 8, 2, 23, 55, 0, 0, pacific)
	clock := testclock.New(start)
	l, watch, scopes := leanAndGeneral(t, b, clock)
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
		if rng.IntN(40) == 0 {
			// A pause of a bucket or the scope, which a new expiry's
			// meta learns; half of them written as a pause that reached no
			// meta (set while the scope's list of windows had lapsed).
			k := rng.IntN(len(buckets) + 1)
			bucket := ""
			if k < len(buckets) {
				bucket = buckets[k].bucket
			}
			d := time.Duration(1+rng.IntN(3)) * time.Second
			unreached := rng.IntN(2) == 0 && k < len(buckets)
			if unreached {
				d *= 20 // long enough to meet a new expiry
			}
			for _, s := range scopes {
				var err error
				if unreached {
					w := l.window(s, bucket, buckets[k].lims[0])
					err = b.client.Set(ctx, w.pause, strconv.FormatInt(clock.Now().Add(d).UnixMicro(), 10), d+time.Second).Err()
				} else {
					err = l.Pause(ctx, s, bucket, d)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
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
			pair := reserveBoth(t, l, scopes, wait, charges...)
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
			settleBoth(t, pair, scripts, units, cancel)
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

// leanAndGeneral returns a limiter on clock whose settlements by
// leanOrGeneral watch counts, and the test's two scopes: the one settled
// by leanOrGeneral, and the one by the general code.
func leanAndGeneral(t *testing.T, b *backend, clock *testclock.Clock) (*Limiter, *leanWatch, [2]string) {
	t.Helper()
	c, _ := b.counted(t)
	watch := &leanWatch{}
	c.AddHook(watch)
	return mustNew(t, c, WithClock(clock.Now)), watch, [2]string{scope(t, "lean"), scope(t, "general")}
}

// reserveBoth makes the same reservation in two scopes kept in step, and
// fails the test when their decisions differ.
func reserveBoth(t *testing.T, l *Limiter, scopes [2]string, wait time.Duration, charges ...Demand) [2]*Reservation {
	t.Helper()
	var pair [2]*Reservation
	for k, s := range scopes {
		r, err := l.Reserve(context.Background(), s, wait, charges...)
		if err != nil {
			t.Fatal(err)
		}
		pair[k] = r
	}
	if pair[0].OK() != pair[1].OK() || pair[0].Time() != pair[1].Time() {
		t.Fatalf("decisions differ: %v at %v against %v at %v", pair[0].OK(), pair[0].Time(), pair[1].OK(), pair[1].Time())
	}
	return pair
}

// settleBoth settles the pair's reservations to units, each by its
// script, or cancels both.
func settleBoth(t *testing.T, pair [2]*Reservation, scripts [2]*redis.Script, units map[string]int64, cancel bool) {
	t.Helper()
	for k, r := range pair {
		var err error
		if cancel {
			err = r.Cancel(context.Background())
		} else {
			err = r.settle(context.Background(), scripts[k], units)
		}
		if err != nil {
			t.Fatal(err)
		}
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

// testSettleWindowsNewExpiry: a settlement that pushes a window's first
// closed slice makes its log, and gives the keys a new expiry; the meta
// then learns a pause in force that never reached it. settlewindows.lua
// takes it, and writes what the general code writes.
func testSettleWindowsNewExpiry(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC))
	l, watch, scopes := leanAndGeneral(t, b, clock)
	scripts := [2]*redis.Script{leanOrGeneral, generalSettle}
	minute := PerWindow(1000, time.Minute)
	var rs [2]*Reservation
	for _, s := range scopes {
		mustAllow(t, l, s, charge("pool", 10, minute))
	}
	clock.Add(time.Second) // the next call closes the first one's slice into the meta
	for k, s := range scopes {
		rs[k] = mustAllow(t, l, s, charge("pool", 100, minute))
		w := l.window(s, "pool", minute)
		if n, err := b.client.Exists(ctx, w.log).Result(); err != nil || n != 0 {
			t.Fatalf("%s: the log exists (%d, %v) before the settlement: the test no longer makes a new one", s, n, err)
		}
		// A pause that reached no meta: the scope's list of windows had
		// lapsed when it was set.
		until := strconv.FormatInt(clock.Now().Add(time.Hour).UnixMicro(), 10)
		if err := b.client.Set(ctx, w.pause, until, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k := range scopes {
		if err := rs[k].settle(ctx, scripts[k], map[string]int64{"pool": 17}); err != nil {
			t.Fatal(err)
		}
	}
	if n := watch.lean.Load(); n != 1 {
		t.Errorf("settlewindows.lua took %d settlements, want 1", n)
	}
	var states [2]string
	for k, s := range scopes {
		w := l.window(s, "pool", minute)
		m, err := b.client.Get(ctx, w.meta).Result()
		if err != nil {
			t.Fatal(err)
		}
		entries, err := b.client.LRange(ctx, w.log, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := b.client.PTTL(ctx, w.log).Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("%s: the new log's TTL is %v (%v), want one", s, ttl, err)
		}
		states[k] = m + "|" + string(appendAll(entries))
	}
	if states[0] != states[1] {
		t.Fatalf("meta and log %x settled by settlewindows.lua, want %x as by the general code", states[0], states[1])
	}
	// The pause, learned, stops the fast decision on the window.
	r := mustAllow(t, l, scopes[0], charge("pool", 1, minute))
	if r.OK() {
		t.Errorf("a call during the pause was admitted")
	}
}
