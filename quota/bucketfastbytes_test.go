package quota

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// bucketsGeneral is reserveScript without bucketfast.lua: a charge of
// token buckets alone through the general decision.
var bucketsGeneral = newScript(binaryPart + nowPart + mixedFastPart + fastPart + readPausesPart + logParts + decidePart + reservePart)

// testBucketFastSameBytes checks bucketfast.lua against the general
// decision on one clock: a run of random calls charging one, two or three
// token buckets (an LLM call's requests, input and output tokens), held,
// cancelled, settled and paused at random, gets the same decisions and
// leaves every bucket's state the same byte for byte, with the same TTL,
// whichever decides. (testBucketFastAgrees compares the decisions alone,
// on two clocks.)
func testBucketFastSameBytes(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	scopes := [2]string{scope(t, "fast"), scope(t, "general")}
	scripts := [2]*redis.Script{reserveScript, bucketsGeneral}
	rpm := TokenBucket(12, 6, 2*time.Second)
	itpm, otpm := TokenBucket(4000, 4000, 2*time.Second), TokenBucket(1500, 1500, 3*time.Second)
	type bucket struct {
		name string
		lim  Limit
	}
	buckets := []bucket{{"requests", rpm}, {"input", itpm}, {"output", otpm}}
	rng := rand.New(rand.NewPCG(43, 8))
	type call struct {
		r       [2]*Reservation
		charged int // how many of buckets it charged
	}
	var held []call
	fast, admitted := 0, 0
	pauses := map[int]string{301: "requests", 330: "", 360: "output"}
	for step := range 400 {
		clock.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		charges := []Demand{charge("requests", 1, rpm), charge("input", int64(1+rng.IntN(900)), itpm), charge("output", int64(1+rng.IntN(400)), otpm)}
		charges = charges[:1+rng.IntN(3)]
		// After step 300, three pauses, each of its own key: a bucket's,
		// the scope's, another bucket's. (A pause key outlives its pause by
		// a second of Redis's own time, far longer than this run of a test
		// clock takes; a key set once reads the same in both scopes.)
		if name, ok := pauses[step]; ok {
			for _, s := range scopes {
				if err := l.Pause(ctx, s, name, time.Second); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
		}
		var wait int64
		if rng.IntN(4) == 0 {
			wait = (5 * time.Second).Microseconds()
		}
		got := decideEach(t, l, step, scopes, scripts, wait, charges)
		f, g := got[0], got[1]
		if _, ok := g.reply.(string); ok {
			t.Fatalf("step %d: a charge of buckets alone took a common decision without bucketfast.lua", step)
		}
		if _, ok := f.reply.(string); ok && len(charges) > 1 {
			fast++
		}
		if f.OK() && !f.Time().After(clock.Now()) && len(charges) > 1 && step <= 300 {
			admitted++
		}
		if f.OK() != g.OK() || f.Time() != g.Time() || f.Remaining() != g.Remaining() {
			t.Fatalf("step %d (%d buckets, wait %dµs): bucketfast.lua said ok=%v at %v remaining %d; the general code ok=%v at %v remaining %d",
				step, len(charges), wait, f.OK(), f.Time(), f.Remaining(), g.OK(), g.Time(), g.Remaining())
		}
		for _, c := range charges {
			if x, y := f.RemainingOf(c.Bucket), g.RemainingOf(c.Bucket); x != y {
				t.Fatalf("step %d: %s: %d remaining after bucketfast.lua, want %d as after the general code", step, c.Bucket, x, y)
			}
		}
		if f.OK() {
			held = append(held, call{got, len(charges)})
		}
		if len(held) > 0 && rng.IntN(5) == 0 {
			i := rng.IntN(len(held))
			cancel := rng.IntN(3) == 0
			units := map[string]int64{}
			for _, x := range buckets[1:held[i].charged] {
				units[x.name] = int64(rng.IntN(900))
			}
			for k := range scopes {
				var err error
				if cancel || len(units) == 0 {
					err = held[i].r[k].Cancel(ctx)
				} else {
					err = held[i].r[k].SettleAll(ctx, units)
				}
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			held = append(held[:i], held[i+1:]...)
		}
		for _, x := range buckets {
			var states [2]string
			var ttls [2]time.Duration
			for k, s := range scopes {
				key := l.window(s, x.name, x.lim).meta
				v, err := b.client.Get(ctx, key).Result()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				states[k] = v
				if ttls[k], err = b.client.PTTL(ctx, key).Result(); err != nil {
					t.Fatal(err)
				}
			}
			if states[0] != states[1] {
				t.Fatalf("step %d: %s: state %x after bucketfast.lua, want %x as after the general code", step, x.name, states[0], states[1])
			}
			// The TTLs were set a moment apart on Redis's own clock.
			if d := ttls[0] - ttls[1]; d < -time.Second || d > time.Second {
				t.Fatalf("step %d: %s: TTL %v after bucketfast.lua, want %v as after the general code", step, x.name, ttls[0], ttls[1])
			}
		}
	}
	if fast < admitted*3/5 {
		t.Errorf("bucketfast.lua decided %d calls of two or three buckets, want most of the %d admitted at once before the pauses", fast, admitted)
	}
	t.Logf("bucketfast.lua decided %d calls of two or three buckets; %d admitted at once before the pauses", fast, admitted)
}
