package quota

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// generalReserve is reserveScript without mixedfast.lua: a charge of
// windows and buckets together through the general decision.
var generalReserve = newScript(binaryPart + nowPart + bucketFastPart + fastPart + readPausesPart + logParts + decidePart + reservePart)

// testMixedFastAgrees checks mixedfast.lua against the general decision:
// a run of random calls charging token buckets beside windows (Gemini's
// shape, a bucket and a Pacific day in one charge, a sliding window among
// them, and three buckets beside a day, which mixedfast.lua leaves to the
// general code), held, cancelled, settled and paused at random across a
// Pacific midnight, gets the same decisions and leaves the same state whichever
// decides: every bucket's state byte for byte, and every window's entries,
// sum, open slice, oldest entry, pause and slice grid (its meta's other
// fields, and whether its closed slices sit in the meta or the log, are
// fast.lua's bookkeeping, which the general code keeps its own way).
func testMixedFastAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	pacific := mustLoad(t, "America/Los_Angeles")
	clock := testclock.New(time.Date(2026, 11, 21, 23, 59, 20, 0, pacific))
	l := b.limiter(t, WithClock(clock.Now))
	scopes := [2]string{scope(t, "mixed"), scope(t, "general")}
	scripts := [2]*redis.Script{reserveScript, generalReserve}

	rpm, tpm := TokenBucket(24, 12, 2*time.Second), TokenBucket(3000, 2000, 2*time.Second)
	rpd, burst := PerDay(900, pacific), PerWindow(40, 5*time.Second)
	sets := [][]Demand{
		{charge("pool", 1, rpm, rpd)},
		{charge("rpm", 1, rpm), charge("rpd", 1, rpd), charge("tpm", 100, tpm)},
		{charge("pool", 1, rpm, burst, rpd)},
		{charge("rpm", 1, rpm), charge("rpd", 1, rpd), charge("tpm", 100, tpm), charge("out", 100, tpm)},
	}
	type window struct {
		bucket string
		lim    Limit
	}
	var all []window
	for _, set := range sets {
		for _, c := range set {
			for _, lim := range c.Limits {
				all = append(all, window{c.Bucket, lim})
			}
		}
	}

	rng := rand.New(rand.NewPCG(43, 4))
	var held [][2]*Reservation
	mixed, now := 0, 0 // decided by mixedfast.lua; admitted at once where it may decide
	for step := range 600 {
		clock.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		set := sets[rng.IntN(len(sets))]
		cost := int64(1 + rng.IntN(3))
		charges := make([]Demand, len(set))
		for i, c := range set {
			charges[i] = charge(c.Bucket, c.Units*cost, c.Limits...)
		}
		// In the last quarter, now and then a pause of the scope ("") or of
		// a bucket, the same in both: mixedfast.lua reads a bucket's pause
		// key, and finds the scope's in the windows' metas. (A pause key
		// outlives its pause by a second of Redis's own time, far longer
		// than this run of a test clock takes, and while it is there the
		// common decisions leave the call to the general code: the calls
		// decided by mixedfast.lua are counted before.)
		if step == 450 || (step > 450 && rng.IntN(15) == 0) {
			bucket := []string{"", "pool", "rpm", "rpd", "tpm"}[rng.IntN(5)]
			if step == 450 {
				bucket = "" // the scope's first, which only the metas tell
			}
			d := time.Duration(1+rng.IntN(1500)) * time.Millisecond
			for _, s := range scopes {
				if err := l.Pause(ctx, s, bucket, d); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
		}
		var wait int64
		if rng.IntN(4) == 0 {
			wait = (2 * time.Second).Microseconds()
		}
		got := decideEach(t, l, step, scopes, scripts, wait, charges)
		f, g := got[0], got[1]
		if _, ok := f.reply.(string); ok && step < 450 {
			mixed++
		}
		if len(set) != 4 && f.OK() && !f.Time().After(clock.Now()) && step < 450 {
			now++
		}
		if _, ok := g.reply.(string); ok {
			t.Fatalf("step %d: a charge of buckets beside windows took a common decision without mixedfast.lua", step)
		}
		if f.OK() != g.OK() || f.Time() != g.Time() || f.Remaining() != g.Remaining() {
			t.Fatalf("step %d (%d charges, cost %d, wait %v): mixedfast.lua said ok=%v at %v remaining %d; the general code ok=%v at %v remaining %d",
				step, len(charges), cost, wait, f.OK(), f.Time(), f.Remaining(), g.OK(), g.Time(), g.Remaining())
		}
		for _, c := range charges {
			if x, y := f.RemainingOf(c.Bucket), g.RemainingOf(c.Bucket); x != y {
				t.Fatalf("step %d: %s: %d remaining after mixedfast.lua, want %d as after the general code", step, c.Bucket, x, y)
			}
		}
		if f.OK() {
			held = append(held, got)
		}
		// Now and then a call is cancelled or settled, the same in both.
		if len(held) > 0 && rng.IntN(6) == 0 {
			i := rng.IntN(len(held))
			cancel := rng.IntN(3) == 0
			units := int64(rng.IntN(300))
			for k := range scopes {
				r := held[i][k]
				var err error
				if cancel {
					err = r.Cancel(ctx)
				} else if r.RemainingOf("tpm") >= 0 {
					err = r.SettleAll(ctx, map[string]int64{"tpm": units})
				}
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			held = append(held[:i], held[i+1:]...)
		}
		for _, w := range all {
			var states [2]string
			for k, s := range scopes {
				states[k] = mixedState(t, b.client, l.window(s, w.bucket, w.lim), w.lim)
			}
			if states[0] != states[1] {
				t.Fatalf("step %d: %s %v: state after mixedfast.lua\n%s\nwant, as after the general code,\n%s", step, w.bucket, w.lim, states[0], states[1])
			}
		}
	}
	if mixed < now*3/5 {
		t.Errorf("mixedfast.lua decided %d of the first 450 calls, want most of the %d admitted at once of the three charges it takes", mixed, now)
	}
	t.Logf("mixedfast.lua decided %d of the first 450 calls, %d admitted at once of the charges it takes", mixed, now)
}

// decideEach decides charges in each of scopes by its own script (the
// arguments as Reserve sends them), and fails the test at step on error.
func decideEach(t *testing.T, l *Limiter, step int, scopes [2]string, scripts [2]*redis.Script, wait int64, charges []Demand) [2]*Reservation {
	t.Helper()
	var got [2]*Reservation
	for k, s := range scopes {
		keys, args, seq, err := l.decision(s, wait, charges, false)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := l.eval(context.Background(), scripts[k], withoutBucketLogs(keys, charges), args)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got[k], err = l.reservation(s, charges, seq, reply); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	return got
}

// mixedState returns what a limit holds, as the general code reads it: a
// bucket's state as its bytes; a window's meta fields but until and exp,
// its entries (the log's, then the closed slices in the meta) and its
// leases.
func mixedState(t *testing.T, c redis.UniversalClient, w *window, lim Limit) string {
	t.Helper()
	ctx := context.Background()
	m, err := c.Get(ctx, w.meta).Result()
	if err == redis.Nil {
		return "none"
	}
	if err != nil {
		t.Fatal(err)
	}
	if lim.refilling() {
		return fmt.Sprintf("%x", m)
	}
	const head = 3 + 81
	if len(m) < head || m[:3] != "#3:" {
		t.Fatalf("%s holds %x: not a meta of format 3", w.meta, m)
	}
	field := func(i int) uint64 { // the i-th 8-byte field after "#3:" and the count
		at := 3 + 8*i
		if i > 3 {
			at++
		}
		return binary.BigEndian.Uint64([]byte(m[at : at+8]))
	}
	closed := int(m[3+32])
	entries, err := c.LRange(ctx, w.log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&log, "%x ", e)
	}
	for k := range closed {
		fmt.Fprintf(&log, "%x ", m[head+16*k:head+16*k+16])
	}
	// at, units, sum, end; pause, head, origin, slice (not until, exp).
	return fmt.Sprintf("open %d+%d sum %d end %d pause %d head %d grid %d/%d entries %s leases %q",
		field(0), field(1), field(2), field(3), field(5), field(6), field(8), field(9),
		log.String(), m[head+16*closed:])
}
