package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/windowcheck"
)

// The scripts of the version before this format (testdata/format2), as
// that version assembled them.
var (
	format2Reserve = redis.NewScript(format2("fast") + format2("log") + format2("decide") + format2("reserve"))
	format2Usage   = redis.NewScript(format2("clock") + format2("log") + format2("usage"))
	format2Cancel  = redis.NewScript(format2("clock") + format2("log") + format2("cancel"))
)

// format2 reads one part of the previous version's scripts.
func format2(part string) string {
	b, err := os.ReadFile("testdata/format2/" + part + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// format2Allow decides with the previous version's script, as a process of
// that version would: the same keys and arguments as this version's
// reserve script (format 2 read an entry id it no longer needs), its
// reply's fast form in text.
func format2Allow(ctx context.Context, l *Limiter, scope string, maxWait time.Duration, c Demand) (*Reservation, error) {
	keys, args, seq, err := l.decision(scope, maxWait.Microseconds(), []Demand{c}, true)
	if err != nil {
		return nil, err
	}
	reply, err := format2Reserve.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	if fast, ok := reply.(string); ok {
		if reply, err = textFastReply(fast); err != nil {
			return nil, err
		}
	}
	return l.reservation(scope, []Demand{c}, seq, reply)
}

// testUpgradeFromFormat2: processes of this format take over a scope that
// processes of format 2 were spending, as an upgrade does, while format 2
// still runs beside them for a while (a rolling upgrade): they read what
// format 2 wrote exactly (the same units counted), no window ever holds
// more than the limit across the switch, format 2's holds are given back
// by this format, and once this format has written, a process of format 2
// refuses the state with ErrFormat rather than misread it, on every path.
func testUpgradeFromFormat2(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	// The processes of format 2 log in as the tests' own client, as in
	// testUpgradeFromFormat1.
	l2 := mustNew(t, b.client)
	s := scope(t, "s")
	const units = 300
	window := 300 * time.Millisecond
	lim := PerWindow(units, window)
	var (
		mu    sync.Mutex
		calls []windowcheck.Call
		holds []*Reservation // format 2's, given back by this format
	)
	spend := func(old bool, until time.Time) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 5))
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
						r, err = format2Allow(ctx, l2, s, maxWait, c)
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
					if old && r.Delay() > 0 && rng.IntN(3) == 0 {
						mu.Lock()
						holds = append(holds, r)
						mu.Unlock()
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
	old, err := format2Usage.Run(ctx, b.client, []string{w.log, w.meta, w.pause, w.scopePause},
		"", l.span(w, lim, &now)).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := b.client.Get(ctx, w.meta).Result(); err != nil || !strings.HasPrefix(m, "#2:") {
		t.Fatalf("meta = %q (%v) after format 2 spent, want format 2's", m, err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used > old[1] || old[1] == 0 {
		// The two reads are a moment apart: entries may leave in between.
		t.Errorf("format 2 counts %d units, this format %d of what format 2 wrote", old[1], u.Used)
	}
	// A hold of format 2 given back by this format: its units leave.
	if len(holds) > 0 {
		before := mustUsage(t, l, s, "b", lim).Used
		r := holds[len(holds)-1]
		holds = holds[:len(holds)-1]
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if after := mustUsage(t, l, s, "b", lim).Used; after > before-r.charges[0].Units {
			t.Errorf("used %d after this format gave back a format-2 hold of %d, from %d", after, r.charges[0].Units, before)
		}
	}
	for _, r := range holds { // the rest count as spent
		calls = append(calls, windowcheck.Call{At: r.Time(), Units: r.charges[0].Units})
	}
	spend(false, time.Now().Add(3*window))
	if most, at := windowcheck.Most(calls, window); most > units {
		t.Errorf("a window ending %v held %d units, over the limit of %d", at, most, units)
	}
	if _, err := readMeta(b.client.Get(ctx, w.meta).Val()); err != nil {
		t.Errorf("after this format spent: %v", err)
	}
	// Format 2 meets this format's state: every path refuses it.
	_, err = format2Allow(ctx, l2, s, 0, charge("b", 1, lim))
	if !errors.Is(err, ErrFormat) {
		t.Errorf("a format-2 decision on this format's state = %v, want ErrFormat", err)
	}
	_, err = format2Allow(ctx, l2, s, window, charge("b", units, lim))
	if !errors.Is(err, ErrFormat) {
		t.Errorf("a format-2 hold on this format's state = %v, want ErrFormat", err)
	}
	now = time.Now()
	_, err = format2Usage.Run(ctx, b.client, []string{w.log, w.meta, w.pause, w.scopePause}, "", l.span(w, lim, &now)).Result()
	if !errors.Is(redisError(ctx, "usage", err), ErrFormat) {
		t.Errorf("a format-2 usage of this format's state = %v, want ErrFormat", err)
	}
	_, err = format2Cancel.Run(ctx, b.client, []string{w.meta, w.log}, "", strconv.FormatInt(now.UnixMicro(), 10), 1, l.span(w, lim, &now)).Result()
	if !errors.Is(redisError(ctx, "cancel", err), ErrFormat) {
		t.Errorf("a format-2 cancel on this format's state = %v, want ErrFormat", err)
	}
}
