package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testAnnounce: units an upstream counts beyond a window's own count are
// counted as spent until the announced reset, once however many processes
// read the announcement, and never given back.
func testAnnounce(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l, other := b.limiter(t, WithClock(clock.Now)), b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)
	mustAllow(t, l, s, charge("b", 10, lim))

	// The upstream counts 40 used until t0+30s: 30 spent elsewhere.
	a := Announcement{Used: 40, Reset: t0.Add(30 * time.Second), Limit: 100}
	for _, lim2 := range []*Limiter{l, other, l} { // three readers of one announcement
		outside, _, err := lim2.Announce(ctx, s, "b", a, lim)
		if err != nil || outside != 30 {
			t.Fatalf("Announce = %d, %v; want 30 spent elsewhere", outside, err)
		}
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 40 {
		t.Fatalf("used %d after the announcement, want 40 (counted once)", u.Used)
	}
	// A later, higher level for the same reset raises it; an older one
	// (an earlier reset) changes nothing.
	if outside, _, _ := l.Announce(ctx, s, "b", Announcement{Used: 55, Reset: a.Reset}, lim); outside != 45 {
		t.Errorf("a higher level: %d spent elsewhere, want 45", outside)
	}
	if _, changed, _ := l.Announce(ctx, s, "b", Announcement{Used: 99, Reset: t0.Add(10 * time.Second)}, lim); changed {
		t.Error("an older announcement changed the count")
	}
	if outside, changed, _ := l.Announce(ctx, s, "b", Announcement{Used: 20, Reset: a.Reset}, lim); outside != 45 || changed {
		t.Errorf("a lower level: %d (changed %v), want the 45 kept: nothing is given back", outside, changed)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 55 {
		t.Fatalf("used %d, want 55", u.Used)
	}
	// 45 of 100 room left: a 50-unit call waits for the record to leave, at
	// the announced reset.
	r := mustAllow(t, l, s, charge("b", 50, lim))
	if r.OK() || r.RetryAfter() != 30*time.Second {
		t.Errorf("50 units: OK=%v RetryAfter=%v, want refused until the reset, 30s", r.OK(), r.RetryAfter())
	}
	clock.Add(30 * time.Second)
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
		t.Errorf("used %d after the reset, want the own 10", u.Used)
	}
	last, ok, err := other.LastAnnouncement(ctx, s, "b")
	if err != nil || !ok || !last.Reset.Equal(a.Reset) || last.Limit != 100 {
		t.Errorf("LastAnnouncement = %+v, %v, %v; want the newest, reset %v, limit 100", last, ok, err, a.Reset)
	}
}

// testFixedWindow: a fixed window counts what was admitted since its start
// and starts afresh at its end; with no end known it is a sliding window.
func testFixedWindow(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	ends := t0.Add(20 * time.Second)
	fixed := PerFixedWindow(10, time.Minute, ends)
	mustAllow(t, l, s, charge("b", 10, fixed))
	clock.Add(15 * time.Second)
	r := mustAllow(t, l, s, charge("b", 1, fixed))
	if r.OK() || r.RetryAfter() != 5*time.Second {
		t.Errorf("in a full fixed window: OK=%v RetryAfter=%v, want refused until its end, 5s", r.OK(), r.RetryAfter())
	}
	held, err := l.Reserve(ctx, s, time.Minute, charge("b", 10, fixed))
	if err != nil || !held.OK() || !held.Time().Equal(ends) {
		t.Errorf("a hold: %v, %v; want one at the window's end %v", held, err, ends)
	}
	held.Cancel(ctx)
	clock.Set(ends)
	if r := mustAllow(t, l, s, charge("b", 10, fixed)); !r.OK() {
		t.Errorf("a new fixed window: refused, retry after %v", r.RetryAfter())
	}
	// Past its end with no new end announced, windows follow each other:
	// this one holds the 10 admitted at its start, until ends+1m.
	clock.Add(30 * time.Second)
	if u := mustUsage(t, l, s, "b", fixed); u.Used != 10 {
		t.Errorf("in the window after the announced one: used %d, want 10", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 1, fixed)); r.OK() || r.RetryAfter() != 30*time.Second {
		t.Errorf("in a full window after the announced one: OK=%v RetryAfter=%v, want refused for 30s", r.OK(), r.RetryAfter())
	}
	// With no end known, it is a sliding window: the 10 of the last minute
	// and the 10 before them are counted until each leaves.
	unknown := PerFixedWindow(10, time.Minute, time.Time{})
	if u := mustUsage(t, l, s, "b", unknown); u.Used != 10 {
		t.Errorf("as a sliding window: used %d, want 10", u.Used)
	}
}
