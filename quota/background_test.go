package quota

import (
	"context"
	"testing"
	"time"
)

// testInteractiveBeforeBackground: an interactive call that arrives while
// a background call waits is admitted first; with one FIFO queue for both
// (the behaviour before priorities), the background call, first in line,
// would have taken the room.
func testInteractiveBeforeBackground(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	window := 400 * time.Millisecond
	lim := PerWindow(10, window)
	full := mustAllow(t, l, s, charge("b", 10, lim))

	bg := make(chan *Reservation, 1)
	go func() {
		r, err := l.Reserve(WithPriority(ctx, Background), s, 3*window, charge("b", 10, lim))
		if err != nil {
			t.Error(err)
		}
		bg <- r
	}()
	for i := 0; bgRoomSize(t, b, l, s) == 0 && i < 500; i++ {
		time.Sleep(time.Millisecond)
	}
	if bgRoomSize(t, b, l, s) != 1 {
		t.Fatal("the background call never entered the room")
	}
	inter, err := l.Reserve(ctx, s, 3*window, charge("b", 10, lim))
	if err != nil || !inter.OK() {
		t.Fatalf("the interactive call: %v, %v", inter, err)
	}
	back := <-bg
	if back == nil || !back.OK() {
		t.Fatalf("the background call was refused")
	}
	if want := full.Time().Add(window); !inter.Time().Equal(want) {
		t.Errorf("interactive admitted at %v, want when the first window's units leave, %v", inter.Time(), want)
	}
	if !back.Time().After(inter.Time().Add(window - time.Millisecond)) {
		t.Errorf("background admitted at %v, before the interactive call's units (at %v) left", back.Time(), inter.Time())
	}
	if back.Delay() != 0 {
		t.Errorf("a background reservation has a delay %v: it never holds", back.Delay())
	}
}

// testBackgroundInArrivalOrder: background calls are admitted in the
// order they came; an immediate background decision does not pass one
// that waits, while an interactive one does.
func testBackgroundInArrivalOrder(t *testing.T, b *backend) {
	ctx := context.Background()
	bgctx := WithPriority(ctx, Background)
	l := b.limiter(t)
	s := scope(t, "s")
	window := 300 * time.Millisecond
	lim := PerWindow(10, window)
	mustAllow(t, l, s, charge("b", 9, lim))

	done := make(chan string, 2)
	for _, name := range []string{"first", "second"} {
		before := bgRoomSize(t, b, l, s)
		go func() {
			r, err := l.Reserve(bgctx, s, 4*window, charge("b", 6, lim))
			if err != nil || !r.OK() {
				t.Errorf("%s: %v, %v", name, r, err)
			}
			done <- name
		}()
		for i := 0; bgRoomSize(t, b, l, s) == before && i < 500; i++ {
			time.Sleep(time.Millisecond)
		}
	}
	// One unit is free, but two background calls wait ahead.
	r, err := l.Allow(bgctx, s, charge("b", 1, lim))
	if err != nil || r.OK() {
		t.Errorf("an immediate background call passed two waiting ones: %v, %v", r, err)
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); !r.OK() {
		t.Error("an immediate interactive call was refused with a unit free")
	}
	if a, b := <-done, <-done; a != "first" || b != "second" {
		t.Errorf("admitted %s then %s, want first then second", a, b)
	}
	if n := bgRoomSize(t, b, l, s); n != 0 {
		t.Errorf("%d waiters left in the room", n)
	}
}

// bgRoomSize counts the waiters in scope s's background room.
func bgRoomSize(t *testing.T, b *backend, l *Limiter, s string) int64 {
	t.Helper()
	n, err := b.client.ZCard(context.Background(), l.backgroundKeys(s)[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
