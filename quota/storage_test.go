package quota

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// keysOf returns the log and meta keys of one bucket window of a scope, as
// the limiter names them.
func keysOf(l *Limiter, s, bucket string, lim Limit) (log, meta string) {
	log, meta, _ = windowKeys(l.scopeKey(s), bucket, lim)
	return log, meta
}

// dayEnd returns the midnight that ends the local day holding t.
func dayEnd(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// sumOf returns the sum key of one bucket window of a scope.
func sumOf(l *Limiter, s, bucket string, lim Limit) string {
	_, _, sum := windowKeys(l.scopeKey(s), bucket, lim)
	return sum
}

// testOneEntryPerCall checks that weight costs nothing: a 100-unit call
// writes one entry, like a 1-unit call.
func testOneEntryPerCall(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(1000, time.Minute)
	mustAllow(t, l, s, charge("b", 100, lim))
	mustAllow(t, l, s, charge("b", 1, lim))
	log, _ := keysOf(l, s, "b", lim)
	entries, err := b.client.LRange(ctx, log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("log holds %d entries for two calls, want 2: %q", len(entries), entries)
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != 101 {
		t.Errorf("used %d, want 101", got)
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
	dlog, dmeta := keysOf(l, s, "b", day)
	untilHoldLeaves := time.Until(hold.Time().Add(time.Minute))
	untilMidnight := time.Until(dayEnd(first.Time(), la))
	second := time.Second
	cases := []struct {
		key      string
		min, max time.Duration
	}{
		// until every entry has left, and at most a window and 2s more
		{log, untilHoldLeaves, untilHoldLeaves + time.Minute + 2*second},
		{meta, untilHoldLeaves, untilHoldLeaves + time.Minute + 2*second},
		{sumOf(l, s, "b", minute), untilHoldLeaves, untilHoldLeaves + time.Minute + 2*second},
		// until the Pacific midnight, and a moment
		{dlog, untilMidnight, untilMidnight + 3*second},
		{dmeta, untilMidnight, untilMidnight + 3*second},
		{pauseKey(l.scopeKey(s), "b"), 29 * second, 32 * second},
	}
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

// testSameMicrosecond checks that two calls decided in the same microsecond
// are both recorded, and that entries keep their timestamps digit for digit:
// Redis prints Lua numbers as %.14g, which would turn 1763771234567891 into
// 1.7637712345679e+15.
func testSameMicrosecond(t *testing.T, b *backend) {
	ctx := context.Background()
	const us = 1763771234567891
	clock := testclock.New(time.UnixMicro(us))
	l := b.limiter(t, WithClock(clock.Now))
	other := b.limiter(t, WithClock(clock.Now)) // another process, its own ids
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
	log, meta := keysOf(l, s, "b", lim)
	entries, err := b.client.LRange(ctx, log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	form := regexp.MustCompile(`^` + strconv.Itoa(us) + `:1:[0-9a-z]+\.[0-9a-z]+$`)
	seen := map[string]bool{}
	for _, e := range entries {
		if !form.MatchString(e) {
			t.Errorf("entry %q does not match %v", e, form)
		}
		if seen[e] {
			t.Errorf("entry %q written twice", e)
		}
		seen[e] = true
	}
	if len(entries) != 3 {
		t.Errorf("log holds %d entries, want 3", len(entries))
	}
	m, err := b.client.Get(ctx, meta).Result()
	if err != nil {
		t.Fatal(err)
	}
	// until:head:exp:format
	if f := strings.Split(m, ":"); len(f) != 4 || f[1] != strconv.Itoa(us) || f[3] != strconv.Itoa(format) {
		t.Errorf("meta = %q, want the head at %d and format %d", m, us, format)
	}
	if sum, err := b.client.Get(ctx, sumOf(l, s, "b", lim)).Result(); err != nil || sum != "3" {
		t.Errorf("sum = %q (%v), want 3", sum, err)
	}
}

// testMetaRebuilt checks that a lost running sum is rebuilt from the log.
func testMetaRebuilt(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(7, time.Minute)
	for range 3 {
		mustAllow(t, l, s, charge("b", 2, lim))
	}
	_, meta := keysOf(l, s, "b", lim)
	sumKey := sumOf(l, s, "b", lim)
	if err := b.client.Del(ctx, sumKey).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 2, lim)); r.OK() {
		t.Error("admitted 2 units on top of 6 of 7: the sum was not rebuilt from the log")
	}
	if got := mustUsage(t, l, s, "b", lim).Used; got != 6 {
		t.Errorf("used %d, want 6", got)
	}
	if sum, err := b.client.Get(ctx, sumKey).Result(); err != nil || sum != "6" {
		t.Errorf("sum = %q (%v), want it rewritten as 6", sum, err)
	}
	if err := b.client.Del(ctx, meta).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 2, lim)); r.OK() {
		t.Error("admitted 2 units on top of 6 of 7 with the meta lost")
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
// covered by its sum until the log's oldest entry would have left the
// window; a meta or sum evicted alone is rebuilt from the log
// (testMetaRebuilt). All evicted take their units with them, and those may
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
	if err := b.client.Del(ctx, meta, sumOf(l, s, "b", lim)).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Error("with log and meta evicted, the limit still refused: then nothing is at risk, and the README is wrong")
	}
}
