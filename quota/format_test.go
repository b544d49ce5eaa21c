package quota

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// The scripts of the version before this format (testdata/format1), as
// that version assembled them.
var (
	format1Reserve = redis.NewScript(format1("fast") + format1("log") + format1("decide") + format1("reserve"))
	format1Usage   = redis.NewScript(format1("clock") + format1("log") + format1("usage"))
)

// format1 reads one part of the previous version's scripts.
func format1(part string) string {
	b, err := os.ReadFile("testdata/format1/" + part + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestFormatMatchesTheScripts: the Go side and log.lua name one format.
func TestFormatMatchesTheScripts(t *testing.T) {
	m := regexp.MustCompile(`(?m)^local FORMAT = '(\d+)'$`).FindStringSubmatch(logPart)
	if m == nil || m[1] != strconv.Itoa(format) {
		t.Fatalf("log.lua's FORMAT = %v, want %d", m, format)
	}
}

// legacySum is the key of format 1 that held a window's sum.
func legacySum(w *window) string { return strings.TrimSuffix(w.meta, ":meta") + ":sum" }

// format1Keys returns the keys and arguments a process of format 1 sent
// to decide one charge: each window's meta and sum, the pauses, the logs;
// the clock, maxwait, an entry id, then per window units, room and span.
func format1Keys(l *Limiter, scope string, maxWait time.Duration, c Demand, id string) ([]string, []any) {
	now, clockArg := l.clockArg()
	var keys, logs []string
	args := []any{clockArg, maxWait.Microseconds(), id}
	var w *window
	for _, lim := range c.Limits {
		w = l.window(scope, c.Bucket, lim)
		keys = append(keys, w.meta, legacySum(w))
		logs = append(logs, w.log)
		args = append(args, c.Units, lim.Units-c.Units, l.span(w, lim, &now))
	}
	keys = append(append(keys, w.pause, w.scopePause), logs...)
	return keys, args
}

// format1Allow decides with the previous version's script, as a process of
// that version would.
func format1Allow(ctx context.Context, l *Limiter, scope string, maxWait time.Duration, c Demand, id string) (*Reservation, error) {
	keys, args := format1Keys(l, scope, maxWait, c, id)
	reply, err := format1Reserve.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	if list, ok := reply.([]any); ok && len(list) == 5 {
		reply = append(list, int64(0)) // format 1 told no rooms; RemainingOf is not read here
	}
	if fast, ok := reply.(string); ok {
		reply, err = textFastReply(fast)
		if err != nil {
			return nil, err
		}
	}
	return l.reservation(scope, []Demand{c}, 0, reply)
}

// testUpgradeFromFormat1: processes of this format take over a scope that
// processes of format 1 were spending, as an upgrade does: they read what
// format 1 wrote exactly (the same units counted), no window ever holds
// more than the limit across the switch, and once this format has
// written, a process of format 1 refuses the state rather than misread
// it.
func testUpgradeFromFormat1(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	// The processes of format 1 log in as the tests' own client: their
	// scripts run commands that the README's ACL line, made for this
	// format, no longer grants.
	l1 := mustNew(t, b.client)
	s := scope(t, "s")
	const units = 300
	window := 300 * time.Millisecond
	lim := PerWindow(units, window)
	var (
		mu    sync.Mutex
		calls []windowcheck.Call
	)
	spend := func(old bool, until time.Time) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 3))
				for i := 0; i < 300 && time.Now().Before(until); i++ {
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
					c := charge("b", 1, lim)
					if rng.IntN(4) == 0 {
						c.Units = 25
					}
					maxWait := time.Duration(0)
					if rng.IntN(3) == 0 {
						maxWait = window / 2
					}
					var r *Reservation
					var err error
					if old {
						r, err = format1Allow(ctx, l1, s, maxWait, c, strconv.Itoa(g)+"."+strconv.Itoa(i))
					} else {
						r, err = l.Reserve(ctx, s, maxWait, c)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if !r.OK() {
						continue
					}
					if !old && r.Delay() > 0 && rng.IntN(3) == 0 {
						if err := r.Cancel(ctx); err != nil {
							t.Error(err)
						}
						continue
					}
					mu.Lock()
					calls = append(calls, windowcheck.Call{At: r.Time(), Units: c.Units})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}

	spend(true, time.Now().Add(3*window))
	w := l.window(s, "b", lim)
	now := time.Now()
	old, err := format1Usage.Run(ctx, b.client, []string{w.log, w.meta, legacySum(w), w.pause, w.scopePause},
		"", l.span(w, lim, &now)).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used > old[1] || old[1] == 0 {
		// The two reads are a moment apart: entries may leave in between.
		t.Errorf("format 1 counts %d units, this format %d of what format 1 wrote", old[1], u.Used)
	}
	spend(false, time.Now().Add(3*window))
	if most, at := windowcheck.Most(calls, window); most > units {
		t.Errorf("a window ending %v held %d units, over the limit of %d", at, most, units)
	}
	if n, err := b.client.Exists(ctx, legacySum(w)).Result(); err != nil || n != 0 {
		t.Errorf("format 1's sum key is still there (%d, %v) after this format wrote", n, err)
	}
	_, err = format1Allow(ctx, l1, s, 0, charge("b", 1, lim), "late")
	if err == nil || !strings.Contains(err.Error(), "FORMAT tollgate:") {
		t.Errorf("a format-1 decision on this format's state = %v, want its FORMAT refusal", err)
	}
}

// testLaterFormatRefused: state of a later format is refused with
// ErrFormat by every operation that reads it, on the fast path and the
// general one, and nothing is written over it.
func testLaterFormatRefused(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	lim := PerWindow(100, time.Minute)
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	cases := []struct {
		name string
		keys func(w *window) map[string]string
	}{
		{"meta of format 4", func(w *window) map[string]string {
			return map[string]string{w.meta: "#4:" + now + ":whatever"}
		}},
		{"meta of this format with unknown fields", func(w *window) map[string]string {
			f := thisMeta(now, nil, ";x")
			f.until = 0 // read by the general path: fast.lua copies records as they are
			return map[string]string{w.meta: writeMeta(f)}
		}},
		{"meta of this format cut short", func(w *window) map[string]string {
			return map[string]string{w.meta: writeMeta(thisMeta(now, nil, ""))[:40]}
		}},
		{"meta of this format with closed slices past its end", func(w *window) map[string]string {
			m := writeMeta(thisMeta(now, [][2]int64{{1, 1}, {2, 2}}, ""))
			return map[string]string{w.meta: m[:len(m)-1]}
		}},
		{"meta of this format with as many closed slices as a push takes", func(w *window) map[string]string {
			return map[string]string{w.meta: writeMeta(thisMeta(now, make([][2]int64, metaBuffer), ""))}
		}},
		{"meta of this format with a negative field", func(w *window) map[string]string {
			f := thisMeta(now, nil, "")
			f.head, f.until = -1, 0
			return map[string]string{w.meta: writeMeta(f)}
		}},
		{"meta of format 2 with unknown fields", func(w *window) map[string]string {
			return map[string]string{w.meta: "#2:0000000000000000:0000000000000000:5:5:" + now + ":" + now + ":9999999999999999:0:60000;x"}
		}},
		{"meta of format 2 cut short", func(w *window) map[string]string {
			return map[string]string{w.meta: "#2:9999999999999999:" + now + ":5"}
		}},
		// A format-1 meta is read when its sum is: not one with an
		// unknown format number or unknown fields, or beside a sum that is
		// not a count.
		{"format-1 meta with an unknown format number", func(w *window) map[string]string {
			return map[string]string{w.meta: "0000000000000000:" + now + ":9999999999999999:3", legacySum(w): "5"}
		}},
		{"format-1 meta with unknown fields", func(w *window) map[string]string {
			return map[string]string{w.meta: "0000000000000000:" + now + ":9999999999999999:1;x", legacySum(w): "5"}
		}},
		{"format-1 sum that is not a count", func(w *window) map[string]string {
			return map[string]string{w.meta: "9999999999999999:" + now + ":9999999999999999:1", legacySum(w): "u=5"}
		}},
		{"bucket pause of another format", func(w *window) map[string]string {
			return map[string]string{w.pause: "2:" + now}
		}},
		{"scope pause of another format", func(w *window) map[string]string {
			return map[string]string{w.scopePause: "until=" + now}
		}},
		{"log entry of another format, meta gone", func(w *window) map[string]string {
			return map[string]string{w.log: "#3|" + now + "|5"}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := scope(t, strconv.Itoa(i))
			w := l.window(s, "b", lim)
			state := c.keys(w)
			for k, v := range state {
				var err error
				if k == w.log {
					err = b.client.RPush(ctx, k, v).Err()
				} else {
					err = b.client.Set(ctx, k, v, time.Hour).Err()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			ops := map[string]error{}
			_, ops["Allow"] = l.Allow(ctx, s, charge("b", 1, lim))
			_, ops["Reserve"] = l.Reserve(ctx, s, time.Hour, charge("b", 1, lim))
			_, ops["Usage"] = l.Usage(ctx, s, "b", lim)
			_, ops["Lease"] = l.Lease(ctx, s, charge("b", 10, lim), time.Second)
			if _, pausedHere := state[w.pause]; pausedHere {
				ops["Pause"] = l.Pause(ctx, s, "b", time.Second)
			}
			if _, metaHere := state[w.meta]; metaHere {
				ops["Record"] = l.Record(ctx, s, charge("b", 1, lim))
			}
			for op, err := range ops {
				if !errors.Is(err, ErrFormat) || errors.Is(err, ErrRedis) {
					t.Errorf("%s = %v, want ErrFormat (and no Redis failure)", op, err)
				} else if msg := err.Error(); !strings.HasPrefix(msg, "quota: "+s) && !strings.HasPrefix(msg, "quota: "+DefaultPrefix) ||
					!strings.Contains(msg, "Redis format") || strings.Contains(msg, "script:") {
					t.Errorf("%s = %q, want a clean message naming the key and the format", op, msg)
				}
			}
			for k, v := range state {
				var got string
				var err error
				if k == w.log {
					got, err = b.client.LIndex(ctx, k, 0).Result()
				} else {
					got, err = b.client.Get(ctx, k).Result()
				}
				if err != nil || got != v {
					t.Errorf("%s = %q (%v) after the refusals, want %q untouched", k, got, err, v)
				}
			}
		})
	}
}

// thisMeta is a meta of this format for testLaterFormatRefused: 5 units
// counted in the open slice at now, fast.lua's until far ahead (so that
// the structural faults meet fast.lua's checks first), with the closed
// slices and records given.
func thisMeta(now string, closed [][2]int64, rest string) metaFields {
	t, _ := strconv.ParseInt(now, 10, 64)
	return metaFields{at: t, units: 5, sum: 5, end: t + 60000, until: 9999999999999999, head: t,
		exp: t + 180_000_000, slice: 60000, closed: closed, rest: rest}
}

// testSlicedMatchesUnsliced replays one arrival sequence, on one hand-moved
// clock, through this format's engine and format 1's (which logged every
// call on its own): calls of random costs that often find the limit
// reached and wait for holds. Each call is admitted by both, the sliced
// engine at the same instant or later by at most one slice.
func testSlicedMatchesUnsliced(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	const units = 500
	window := time.Second
	slice := window / 1000
	lim := PerWindow(units, window)
	sliced, unsliced := scope(t, "sliced"), scope(t, "unsliced")
	rng := rand.New(rand.NewPCG(7, 11))
	var later, held int
	var most time.Duration
	for i := range 1500 {
		clock.Add(time.Duration(rng.ExpFloat64() * float64(22*time.Millisecond))) // 95% of the limit, in bursts
		c := charge("b", 1+rng.Int64N(20), lim)
		old, err := format1Allow(ctx, l, unsliced, 5*window, c, strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Reserve(ctx, sliced, 5*window, c)
		if err != nil {
			t.Fatal(err)
		}
		if !old.OK() || !r.OK() {
			t.Fatalf("call %d: admitted by format 1 %v, by this format %v; want both", i, old.OK(), r.OK())
		}
		d := r.Time().Sub(old.Time())
		if d < 0 || d > slice {
			t.Fatalf("call %d: admitted at %v by this format, %v by format 1: want the same instant or at most a slice (%v) later",
				i, r.Time().Sub(t0), old.Time().Sub(t0), slice)
		}
		if d > 0 {
			later++
		}
		if old.Delay() > 0 {
			held++
		}
		most = max(most, d)
	}
	t.Logf("of 1500 calls, %d waited for holds; %d were admitted later by the sliced engine, by at most %v", held, later, most)
	if held < 150 {
		t.Errorf("%d calls of 1500 waited for holds: the sequence does not reach the limit", held)
	}
}

// textFastReply turns the fast reply of formats 1 and 2,
// "<now>:<sum_1>:...", into this format's: each field 8 bytes, big-endian.
func textFastReply(reply string) (string, error) {
	var b []byte
	for f := range strings.SplitSeq(reply, ":") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", err
		}
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return string(b), nil
}
