package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quotapath"
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
		got, err := lim2.Announce(ctx, s, "b", a, lim)
		if err != nil || got.Outside != 30 {
			t.Fatalf("Announce = %+v, %v; want 30 spent elsewhere", got, err)
		}
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 40 {
		t.Fatalf("used %d after the announcement, want 40 (counted once)", u.Used)
	}
	// A later, higher level for the same reset raises it; an older one
	// (an earlier reset) changes nothing.
	if got, _ := l.Announce(ctx, s, "b", Announcement{Used: 55, Reset: a.Reset}, lim); got.Outside != 45 {
		t.Errorf("a higher level: %d spent elsewhere, want 45", got.Outside)
	}
	if got, _ := l.Announce(ctx, s, "b", Announcement{Used: 99, Reset: t0.Add(10 * time.Second)}, lim); got.Changed || !got.Reset.Equal(a.Reset) {
		t.Errorf("an older announcement: changed %v, newest reset %v; want unchanged, %v", got.Changed, got.Reset, a.Reset)
	}
	if got, _ := l.Announce(ctx, s, "b", Announcement{Used: 20, Reset: a.Reset}, lim); got.Outside != 45 || got.Changed {
		t.Errorf("a lower level: %d (changed %v), want the 45 kept: nothing is given back", got.Outside, got.Changed)
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

// testAnnounceAsOf: the calls admitted after the upstream took its count
// are not in it, so they are not taken for others' spending.
func testAnnounceAsOf(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)
	counted := mustAllow(t, l, s, charge("b", 10, lim))
	clock.Add(time.Second)
	mustAllow(t, l, s, charge("b", 3, lim)) // in flight when the upstream counted
	clock.Add(100 * time.Millisecond)       // another slice: the 3 close into the meta
	mustAllow(t, l, s, charge("b", 2, lim))
	// The upstream counts 30: the 10 it had seen and 20 spent elsewhere.
	a := Announcement{Used: 30, Reset: t0.Add(30 * time.Second), AsOf: counted.Time()}
	if got, err := l.Announce(ctx, s, "b", a, lim); err != nil || got.Outside != 20 {
		t.Errorf("as of the counted call: %d, %v spent elsewhere; want 20", got.Outside, err)
	}
	// Without AsOf, the calls in flight are taken for counted: 15.
	other := scope(t, "other")
	mustAllow(t, l, other, charge("b", 10, lim))
	mustAllow(t, l, other, charge("b", 5, lim))
	a.AsOf = time.Time{}
	if got, err := l.Announce(ctx, other, "b", a, lim); err != nil || got.Outside != 15 {
		t.Errorf("without AsOf: %d, %v spent elsewhere; want 15", got.Outside, err)
	}
}

// testAnnounceTolerance: resets less than ResetTolerance apart are one
// reset read at different instants (the most spent elsewhere is kept);
// one earlier by more is an older announcement.
func testAnnounceTolerance(t *testing.T, b *backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC)
	clock := testclock.New(t0)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(100, time.Minute)
	reset := t0.Add(30 * time.Second)
	announce := func(used int64, reset time.Time) (int64, bool) {
		t.Helper()
		got, err := l.Announce(ctx, s, "b", Announcement{Used: used, Reset: reset}, lim)
		if err != nil {
			t.Fatal(err)
		}
		return got.Outside, got.Changed
	}
	if outside, _ := announce(40, reset); outside != 40 {
		t.Fatalf("first: %d spent elsewhere, want 40", outside)
	}
	// 400 ms earlier, less used: the same reset, read a little later; the
	// 40 stay.
	if outside, changed := announce(30, reset.Add(-400*time.Millisecond)); outside != 40 || changed {
		t.Errorf("a lower level 400ms earlier: %d (changed %v), want the 40 kept", outside, changed)
	}
	// 400 ms later, more used: the same reset, raised.
	if outside, changed := announce(50, reset.Add(400*time.Millisecond)); outside != 50 || !changed {
		t.Errorf("a higher level 400ms later: %d (changed %v), want 50", outside, changed)
	}
	// The first reading is kept, for every process to end the window at.
	if last, ok, err := l.LastAnnouncement(ctx, s, "b"); err != nil || !ok || !last.Reset.Equal(reset) {
		t.Errorf("LastAnnouncement = %+v, %v, %v; want the first reading, %v", last, ok, err, reset)
	}
	// Two seconds earlier than the newest: an older announcement.
	if _, changed := announce(90, reset.Add(-2*time.Second)); changed {
		t.Error("an announcement two seconds older changed the count")
	}
	if got := quotapath.ResetTolerance(0); got != time.Second {
		t.Errorf("quotapath.ResetTolerance(0) = %v, want 1s", got)
	}
	if got := quotapath.ResetTolerance(time.Second); got != 500*time.Millisecond {
		t.Errorf("quotapath.ResetTolerance(1s) = %v, want 500ms", got)
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
