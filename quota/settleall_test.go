package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// commandCount counts the commands a client sends, less those refused
// with NOSCRIPT (a script's first run on a server is sent twice).
type commandCount struct{ n atomic.Int64 }

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			c.n.Add(1)
		}
		return err
	}
}

func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// testSettleAll: settling an LLM call's buckets at once (SettleAll) leaves
// every limit as settling them one by one does, in one round trip; a bad
// bucket or units settles none.
func testSettleAll(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	c, _ := b.counted(t)
	count := &commandCount{}
	c.AddHook(count)
	l := mustNew(t, c, WithClock(clock.Now))
	rpm := TokenBucket(50, 50, time.Minute)
	itpm, ihour := TokenBucket(10000, 10000, time.Minute), PerWindow(100000, time.Hour)
	otpm := TokenBucket(4000, 4000, time.Minute)
	call := func(input, output int64) []Demand {
		return []Demand{charge("requests", 1, rpm), charge("input", input, itpm, ihour), charge("output", output, otpm)}
	}
	all, one := scope(t, "all"), scope(t, "one")
	for step, truth := range []struct{ input, output int64 }{{700, 30}, {1200, 1000}, {0, 0}, {900, 2500}} {
		var rs [2]*Reservation
		for k, s := range []string{all, one} {
			rs[k] = mustAllow(t, l, s, call(1000, 1000)...)
			if !rs[k].OK() {
				t.Fatalf("step %d: refused, retry after %v", step, rs[k].RetryAfter())
			}
		}
		clock.Add(3 * time.Second)
		before := count.n.Load()
		if err := rs[0].SettleAll(ctx, map[string]int64{"input": truth.input, "output": truth.output}); err != nil {
			t.Fatal(err)
		}
		if got := count.n.Load() - before; got != 1 {
			t.Errorf("step %d: SettleAll sent %d commands, want 1", step, got)
		}
		for _, s := range []struct {
			bucket string
			units  int64
		}{{"input", truth.input}, {"output", truth.output}} {
			if err := rs[1].Settle(ctx, s.bucket, s.units); err != nil {
				t.Fatal(err)
			}
		}
		clock.Add(2 * time.Second)
		for _, x := range []struct {
			bucket string
			lim    Limit
		}{{"requests", rpm}, {"input", itpm}, {"input", ihour}, {"output", otpm}} {
			a, o := mustUsage(t, l, all, x.bucket, x.lim), mustUsage(t, l, one, x.bucket, x.lim)
			if a.Used != o.Used || a.Remaining != o.Remaining {
				t.Errorf("step %d: %s %v: used %d (remaining %d) settled at once, want %d (%d) as settled one by one",
					step, x.bucket, x.lim, a.Used, a.Remaining, o.Used, o.Remaining)
			}
		}
	}

	r := mustAllow(t, l, all, call(1000, 1000)...)
	before := count.n.Load()
	if err := r.SettleAll(ctx, map[string]int64{"input": 1000, "output": 1000}); err != nil {
		t.Fatal(err)
	}
	if err := r.SettleAll(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := count.n.Load() - before; got != 0 {
		t.Errorf("settling to the units charged sent %d commands, want none", got)
	}
	used := mustUsage(t, l, all, "input", ihour).Used
	for _, bad := range []map[string]int64{
		{"input": 10, "output": -1},
		{"input": 10, "output": MaxUnits + 1},
		{"input": 10, "other": 5},
	} {
		if err := r.SettleAll(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SettleAll(%v) = %v, want ErrInvalid", bad, err)
		}
	}
	if got := mustUsage(t, l, all, "input", ihour).Used; got != used {
		t.Errorf("input used %d after invalid settlements, want %d: none settled", got, used)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.SettleAll(ctx, map[string]int64{"input": 5}); err != nil {
		t.Fatal(err)
	}
	if got := mustUsage(t, l, all, "input", ihour).Used; got != used-1000 {
		t.Errorf("input used %d after Cancel then SettleAll, want %d", got, used-1000)
	}
}

// generalSettle is settleScript without settlefast.lua: every settlement
// through log.lua's functions and bucketlog.lua.
var generalSettle = newScript(clockPart + binaryPart + logParts + settlePart)

// testSettleFastAgrees checks settlefast.lua against the general code: a
// run of random LLM calls (three token buckets, holds among them),
// settled, settled again, extra-charged or cancelled at random, leaves
// every bucket's state the same byte for byte, and every decision the
// same, whichever settles them.
func testSettleFastAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC))
	l := b.limiter(t, WithClock(clock.Now))
	scopes := [2]string{scope(t, "fast"), scope(t, "general")}
	scripts := [2]*redis.Script{settleScript, generalSettle}
	rpm := TokenBucket(20, 20, time.Minute)
	itpm := TokenBucket(4000, 2000, time.Minute)
	otpm, oday := TokenBucket(1500, 1500, time.Minute), TokenBucket(20000, 20000, 24*time.Hour)
	buckets := []struct {
		bucket string
		lim    Limit
	}{{"requests", rpm}, {"input", itpm}, {"output", otpm}, {"output", oday}}
	rng := rand.New(rand.NewPCG(43, 7))
	var held [][2]*Reservation
	for step := range 300 {
		clock.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		if rng.IntN(3) > 0 || len(held) == 0 {
			in, out := int64(1+rng.IntN(800)), int64(1+rng.IntN(600))
			wait := time.Duration(rng.IntN(2)) * 20 * time.Second
			pair := reserveBoth(t, l, scopes, wait, charge("requests", 1, rpm), charge("input", in, itpm), charge("output", out, otpm, oday))
			if pair[0].OK() {
				held = append(held, pair)
			}
		} else {
			pair := held[rng.IntN(len(held))]
			units := map[string]int64{"output": int64(rng.IntN(900))}
			if rng.IntN(2) == 0 {
				units["input"] = int64(rng.IntN(1000))
			}
			cancel := rng.IntN(8) == 0
			settleBoth(t, pair, scripts, units, cancel)
		}
		for _, x := range buckets {
			var states [2]string
			for k, s := range scopes {
				v, err := b.client.Get(ctx, l.window(s, x.bucket, x.lim).meta).Result()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				states[k] = v
			}
			if states[0] != states[1] {
				t.Fatalf("step %d: %s %v: state %x settled by settlefast.lua, want %x as by the general code", step, x.bucket, x.lim, states[0], states[1])
			}
		}
	}
}
