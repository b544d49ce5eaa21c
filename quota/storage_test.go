package quota

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// keysOf returns the log and meta keys of one bucket window of a scope, as
// the limiter names them.
func keysOf(l *Limiter, s, bucket string, lim Limit) (log, meta string) {
	return windowKeys(l.scopeKey(s), bucket, lim)
}

// openSlice returns the instant of the latest call in a window's open
// slice and the units counted there, read from its meta.
func openSlice(t *testing.T, b *backend, l *Limiter, s, bucket string, lim Limit) (at, units int64) {
	t.Helper()
	f := mustMeta(t, b, l, s, bucket, lim)
	return f.at, f.units
}

// dayEnd returns the midnight that ends the local day holding t.
func dayEnd(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// testSliceHoldsItsCalls: the calls of one slice of a window (a
// thousandth of it) are counted in one entry, whatever their units, dated
// at the latest of them; a call in a later slice closes it into the log.
func testSliceHoldsItsCalls(t *testing.T, b *backend) {
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(1000, time.Minute) // slices of 60 ms
	mustAllow(t, l, s, charge("b", 100, lim))
	clock.Add(10 * time.Millisecond)
	mustAllow(t, l, s, charge("b", 1, lim))
	if entries := logOf(t, b, l, s, "b", lim); len(entries) != 0 {
		t.Fatalf("the log holds %q while one slice is open, want nothing", entries)
	}
	clock.Add(70 * time.Millisecond)
	mustAllow(t, l, s, charge("b", 5, lim))
	entries := logOf(t, b, l, s, "b", lim)
	want := strconv.FormatInt(t0.Add(10*time.Millisecond).UnixMicro(), 10) + ":101"
	if len(entries) != 1 || entries[0] != want {
		t.Fatalf("the log = %q, want the first slice as one entry %q", entries, want)
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != 106 {
		t.Errorf("used %d, want 106", got)
	}
	// The first slice leaves when its latest call does, not its first.
	clock.Set(t0.Add(time.Minute + 5*time.Millisecond))
	if got := mustUsage(t, l, s, "b", lim).Used; got != 106 {
		t.Errorf("a minute after the first call: used %d, want 106 until its slice's latest call leaves", got)
	}
	clock.Set(t0.Add(time.Minute + 15*time.Millisecond))
	if got := mustUsage(t, l, s, "b", lim).Used; got != 5 {
		t.Errorf("a minute after the slice's latest call: used %d, want 5", got)
	}
}

// testScriptFlush checks that an emptied script cache (a restart, a
// failover, SCRIPT FLUSH) causes no error: EVALSHA falls back to EVAL.
func testScriptFlush(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(10, time.Minute)
	steps := []struct {
		name string
		do   func() error
	}{
		{"Allow", func() error { _, err := l.Allow(ctx, s, charge("b", 1, lim)); return err }},
		{"Usage", func() error { _, err := l.Usage(ctx, s, "b", lim); return err }},
		{"Pause", func() error { return l.Pause(ctx, s, "other", time.Millisecond) }},
		{"Cancel", func() error {
			r, err := l.Reserve(ctx, s, time.Second, charge("b", 1, lim))
			if err != nil {
				return err
			}
			b.flushScripts(t)
			return r.Cancel(ctx)
		}},
	}
	for _, step := range steps {
		b.flushScripts(t)
		if err := step.do(); err != nil {
			t.Errorf("%s after SCRIPT FLUSH: %v", step.name, err)
		}
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != 1 {
		t.Errorf("used %d, want 1 (one Allow; the cancelled hold gone)", got)
	}
}

// testTTLs checks that every key the limiter writes expires, once its
// entries have left their window and not much later, so idle scopes vanish.
func testTTLs(t *testing.T, b *backend) {
	ctx := context.Background()
	la := mustLoad(t, "America/Los_Angeles")
	l := b.limiter(t)
	s := scope(t, "s")
	minute := PerWindow(10, time.Minute)
	day := PerDay(100, la)
	first := mustAllow(t, l, s, charge("b", 10, minute, day))
	if !first.OK() {
		t.Fatal("refused")
	}
	// A hold a minute ahead: the minute's keys must outlive it by a window.
	hold, err := l.Reserve(ctx, s, 2*time.Minute, charge("b", 1, minute))
	if err != nil || !hold.OK() || hold.Delay() < 50*time.Second {
		t.Fatalf("hold: OK=%v Delay=%v err=%v, want a hold about a minute ahead", hold.OK(), hold.Delay(), err)
	}
	if err := l.Pause(ctx, s, "b", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	log, meta := keysOf(l, s, "b", minute)
	_, dmeta := keysOf(l, s, "b", day)
	untilHoldLeaves := time.Until(hold.Time().Add(time.Minute))
	untilMidnight := time.Until(dayEnd(first.Time(), la))
	second := time.Second
	type ttlCase struct {
		key      string
		min, max time.Duration
	}
	cases := []ttlCase{
		// until every entry has left, and at most a window and 2s more
		{meta, untilHoldLeaves, untilHoldLeaves + time.Minute + 2*second},
		// until the Pacific midnight, and a moment (the day's one call is
		// in its open slice, in the meta: it has no log yet)
		{dmeta, untilMidnight, untilMidnight + 3*second},
		{pauseKey(l.scopeKey(s), "b"), 29 * second, 32 * second},
		// the list of the scope's metas, until the last of them expires
		{l.scopeKey(s) + "windows", max(untilHoldLeaves, untilMidnight), max(untilHoldLeaves+time.Minute, untilMidnight+time.Second) + 2*second},
	}
	// The hold (a general decision) closed the first call's slice into
	// the list: the list expires with the meta.
	cases = append(cases, ttlCase{log, untilHoldLeaves, untilHoldLeaves + time.Minute + 2*second})
	for _, c := range cases {
		ttl, err := b.client.PTTL(ctx, c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		// miniredis leaves TTLs where they were set; real Redis counts down.
		if ttl < c.min-time.Second || ttl > c.max {
			t.Errorf("PTTL %s = %v, want within [%v, %v]", c.key, ttl, c.min, c.max)
		}
	}
}

// testSameMicrosecond checks that three calls decided in the same
// microsecond, by two processes, are all counted, and that instants are
// kept digit for digit: Redis prints Lua numbers as %.14g, which would turn
// 1763771234567891 into 1.7637712345679e+15.
func testSameMicrosecond(t *testing.T, b *backend) {
	ctx := context.Background()
	const us = 1763771234567891
	clock := testclock.New(time.UnixMicro(us))
	l := b.limiter(t, WithClock(clock.Now))
	other := b.limiter(t, WithClock(clock.Now)) // another process
	s := scope(t, "s")
	lim := PerWindow(10, time.Minute)
	for _, lm := range []*Limiter{l, l, other} {
		if r := mustAllow(t, lm, s, charge("b", 1, lim)); !r.OK() || r.Time().UnixMicro() != us {
			t.Fatalf("OK=%v Time=%d, want admitted at %d", r.OK(), r.Time().UnixMicro(), us)
		}
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != 3 {
		t.Errorf("used %d after three calls in one microsecond, want 3", got)
	}
	_, meta := keysOf(l, s, "b", lim)
	m, err := b.client.Get(ctx, meta).Result()
	if err != nil {
		t.Fatal(err)
	}
	f, err := readMeta(m)
	const slice = 60000 // a thousandth of a minute, in µs
	if err != nil || f.sum != 3 || f.head != us || f.slice != slice || f.end != us-us%slice+slice || f.at != us || f.units != 3 {
		t.Errorf("meta = %+v (%v), want format %d, sum 3, head %d, the open slice to %d holding 3 at %d", f, err, format, us, us-us%slice+slice, us)
	}
}

// testMetaRebuilt checks that a lost meta is rebuilt from the log: the
// slices pushed to the list still count; the newest, kept in the meta (the
// open slice and fewer than a push's worth of closed ones), are lost with
// it (the README asks for noeviction).
func testMetaRebuilt(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	const calls = metaBuffer + 3 // a push's worth of closed slices, two more, the open one
	lim := PerWindow(2*calls+1, time.Minute)
	for range calls {
		mustAllow(t, l, s, charge("b", 2, lim))
		clock.Add(100 * time.Millisecond) // a slice each
	}
	log, meta := keysOf(l, s, "b", lim)
	if n, err := b.client.LLen(ctx, log).Result(); err != nil || n != metaBuffer {
		t.Fatalf("the list holds %d entries (%v), want the %d closed slices pushed at once", n, err, metaBuffer)
	}
	if err := b.client.Del(ctx, meta).Err(); err != nil {
		t.Fatal(err)
	}
	listed := int64(2 * metaBuffer)
	if r := mustAllow(t, l, s, charge("b", lim.Units-listed+1, lim)); r.OK() {
		t.Errorf("admitted %d units on top of the %d of the pushed slices: the meta was not rebuilt from the log", lim.Units-listed+1, listed)
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != listed {
		t.Errorf("used %d, want the %d of the pushed slices", got, listed)
	}
	if f := mustMeta(t, b, l, s, "b", lim); f.sum != listed {
		t.Errorf("meta = %+v, want it rewritten with a sum of %d", f, listed)
	}
}

// testHostileNames checks that scope and bucket names from users cannot
// break a key's hash tag or reach another scope's keys.
func testHostileNames(t *testing.T, b *backend) {
	l := b.limiter(t)
	lim := PerWindow(1, time.Minute)
	var names []string
	for _, n := range []string{
		"a{b", "a{c", "}{", "{x}", "with space", "line\nbreak", "\xff\xfe invalid utf-8",
		strings.Repeat("k", 10<<10), strings.Repeat("k", 10<<10) + "!", ":", "a:b", "#", "plain",
	} {
		names = append(names, t.Name()+n)
	}
	for _, n := range names {
		if r := mustAllow(t, l, n, charge(n, 1, lim)); !r.OK() {
			t.Errorf("scope %.20q: first call refused; another name's keys leaked into it", n)
		}
	}
	for _, n := range names {
		if r := mustAllow(t, l, n, charge(n, 1, lim)); r.OK() {
			t.Errorf("scope %.20q: second call admitted past a limit of 1", n)
		}
	}
	for _, n := range names {
		if k := l.scopeKey(n); strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || len(k) > 100 {
			t.Errorf("scope %.20q has key prefix %q: want one short hash tag", n, k)
		}
	}
}

// testLogEvicted documents what eviction costs. A log evicted alone is
// covered by the meta's sum until the log's oldest entry would have left
// the window; a meta evicted alone is rebuilt from the log, less its open
// slice (testMetaRebuilt). All evicted take their units with them, and those may
// be spent again: the README asks for noeviction.
func testLogEvicted(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(10, time.Hour)
	mustAllow(t, l, s, charge("b", 10, lim))
	log, meta := keysOf(l, s, "b", lim)
	if err := b.client.Del(ctx, log).Err(); err != nil { // as an eviction would
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() {
		t.Error("with only its log evicted, the limit admitted more: the sum should still hold the count")
	}
	if err := b.client.Del(ctx, meta).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Error("with log and meta evicted, the limit still refused: then nothing is at risk, and the README is wrong")
	}
}
