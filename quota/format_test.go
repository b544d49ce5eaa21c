package quota

import (
	"context"
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

	"github.com/tollgate/tollgate/internal/windowcheck"
)

// The scripts of the version before formats were numbered
// (testdata/format0), assembled as that version assembled them.
var (
	format0Reserve = redis.NewScript(format0("fast") + format0("log") + format0("reserve"))
	format0Usage   = redis.NewScript(format0("log") + format0("usage"))
)

// format0 reads one part of the previous version's scripts.
func format0(part string) string {
	b, err := os.ReadFile("testdata/format0/" + part + ".lua")
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

// format0Allow decides with the previous version's script, as a process of
// that version would, with the same keys and arguments.
func format0Allow(ctx context.Context, l *Limiter, scope string, maxWait time.Duration, c Charge) (*Reservation, error) {
	keys, args, seq, err := l.decision(scope, maxWait.Microseconds(), []Charge{c})
	if err != nil {
		return nil, err
	}
	reply, err := format0Reserve.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	return l.reservation(scope, []Charge{c}, seq, reply)
}

// testAdjacentFormatsAgree runs processes of this version and of the one
// before side by side on one scope, as during a rolling upgrade: immediate
// decisions, holds and cancels from both, with costs of 1 and 25. They
// must agree: no window holds more than the limit, and both read the same
// usage at the end.
func testAdjacentFormatsAgree(t *testing.T, b *backend) {
	ctx := context.Background()
	current, previous := b.limiter(t), b.limiter(t)
	s := scope(t, "s")
	const units = 300
	window := 300 * time.Millisecond
	lim := PerWindow(units, window)

	var (
		mu    sync.Mutex
		calls []windowcheck.Call
		by    [2]int // admissions by the current and the previous version
		wg    sync.WaitGroup
	)
	end := time.Now().Add(6 * window)
	for g := range 8 {
		wg.Go(func() {
			old := g%2 == 1
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; i < 500 && time.Now().Before(end); i++ {
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
					r, err = format0Allow(ctx, previous, s, maxWait, c)
				} else {
					r, err = current.Reserve(ctx, s, maxWait, c)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if !r.OK() {
					continue
				}
				if r.Delay() > 0 && rng.IntN(3) == 0 {
					if err := r.Cancel(ctx); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				mu.Lock()
				calls = append(calls, windowcheck.Call{At: r.Time(), Units: c.Units})
				if old {
					by[1]++
				} else {
					by[0]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if by[0] == 0 || by[1] == 0 {
		t.Fatalf("admissions by the current and previous version: %v; want both", by)
	}
	if most, at := windowcheck.Most(calls, window); most > units {
		t.Errorf("a window ending %v held %d units, over the limit of %d", at, most, units)
	}

	// Both versions read the same units counted now.
	w := current.window(s, "b", lim)
	now := time.Now()
	old, err := format0Usage.Run(ctx, b.client, []string{w.log, w.meta, w.sum, w.pause, w.scopePause},
		"", current.span(w, lim, &now)).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	u := mustUsage(t, current, s, "b", lim)
	// The two reads are a moment apart: entries may leave in between.
	if old[1] < u.Used {
		t.Errorf("the previous version counts %d units, the current %d", old[1], u.Used)
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
		{"meta of format 2", func(w *window) map[string]string {
			return map[string]string{w.meta: "#2:" + now + ":whatever", w.sum: "5"}
		}},
		// A format-1 meta whose until has passed sends every decision to
		// the general path, which reads the whole meta.
		{"meta with an unknown format number", func(w *window) map[string]string {
			return map[string]string{w.meta: "0000000000000000:" + now + ":9999999999999999:2", w.sum: "5"}
		}},
		{"meta with unknown fields", func(w *window) map[string]string {
			return map[string]string{w.meta: "0000000000000000:" + now + ":9999999999999999:1;x", w.sum: "5"}
		}},
		{"sum that is not a count", func(w *window) map[string]string {
			return map[string]string{w.meta: "9999999999999999:" + now + ":9999999999999999:1", w.sum: "u=5"}
		}},
		{"bucket pause of another format", func(w *window) map[string]string {
			return map[string]string{w.pause: "2:" + now}
		}},
		{"scope pause of another format", func(w *window) map[string]string {
			return map[string]string{w.scopePause: "until=" + now}
		}},
		{"log entry of another format, meta gone", func(w *window) map[string]string {
			return map[string]string{w.log: "#2|" + now + "|5"}
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
