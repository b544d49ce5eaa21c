package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// mustTake takes a slot or fails the test.
func mustTake(t *testing.T, ctx context.Context, l *Limiter, s string, n int, maxWait time.Duration) *Slot {
	t.Helper()
	slot, err := l.TakeSlot(ctx, s, "b", n, maxWait)
	if err != nil {
		t.Fatalf("TakeSlot: %v", err)
	}
	return slot
}

// testSlotsCap: n slots and no more; a released slot is free again, and
// bad input is refused.
func testSlotsCap(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	var held []*Slot
	for range 3 {
		held = append(held, mustTake(t, ctx, l, s, 3, 0))
	}
	_, err := l.TakeSlot(ctx, s, "b", 3, 0)
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("a fourth slot of three: %v, want a *RefusedError", err)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held[0].Release(ctx); err != nil { // twice does nothing
		t.Fatal(err)
	}
	held[0] = mustTake(t, ctx, l, s, 3, 0)
	for _, h := range held {
		h.Release(ctx)
	}
	if _, err := l.TakeSlot(ctx, s, "b", 0, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("a cap of 0: %v, want ErrInvalid", err)
	}
}

// testSlotsHandedInOrder: waiters get freed slots in arrival order, a
// background waiter after every interactive one, and one that gives up
// leaves its place.
func testSlotsHandedInOrder(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	first := mustTake(t, ctx, l, s, 1, 0)

	var mu sync.Mutex
	var order []string
	got := make(chan *Slot, 4)
	wait := func(name string, ctx context.Context, maxWait time.Duration) {
		slot, err := l.TakeSlot(ctx, s, "b", 1, maxWait)
		if err != nil {
			mu.Lock()
			order = append(order, name+":"+err.Error())
			mu.Unlock()
			got <- nil
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		got <- slot
	}
	// Arrivals, each once the one before is in the room: a background
	// caller, an impatient one, then two interactive ones.
	arrive := func(name string, ctx context.Context, maxWait time.Duration) {
		before := roomSize(t, b, l, s)
		go wait(name, ctx, maxWait)
		for i := 0; roomSize(t, b, l, s) == before && i < 500; i++ {
			time.Sleep(2 * time.Millisecond)
		}
	}
	arrive("background", WithPriority(ctx, Background), time.Minute)
	arrive("impatient", ctx, 300*time.Millisecond)
	arrive("second", ctx, time.Minute)
	arrive("third", ctx, time.Minute)
	if n := roomSize(t, b, l, s); n != 4 {
		t.Fatalf("%d waiters in the room, want 4", n)
	}
	if slot := <-got; slot != nil { // the impatient one gives up
		t.Fatalf("the impatient waiter got a slot")
	}
	first.Release(ctx)
	for range 3 {
		slot := <-got
		if slot == nil {
			t.Fatal("a waiter was refused")
		}
		slot.Release(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"impatient:quota: refused: no room before the deadline; retry after 0s", "second", "third", "background"}
	if len(order) != len(want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %q, want %q", order, want)
		}
	}
}

// testSlotsFreedToTheWaiter: a slot freed while a caller waits for one
// is the waiter's before Release returns, whether it is freed in a shared
// pipeline (free.lua) or by plain commands in a round trip of their own
// (WithPipelines(0)); the waiter does not have to look again to find it.
func testSlotsFreedToTheWaiter(t *testing.T, b *backend) {
	ctx := context.Background()
	for _, way := range []struct {
		name string
		opts []Option
	}{{"in a shared pipeline", nil}, {"in a round trip of its own", []Option{WithPipelines(0)}}} {
		l := b.limiter(t, way.opts...)
		s := scope(t, "s")
		held := mustTake(t, ctx, l, s, 1, 0)
		got := make(chan *Slot, 1)
		go func() {
			slot, err := l.TakeSlot(ctx, s, "b", 1, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- slot
		}()
		for i := 0; roomSize(t, b, l, s) == 0; i++ {
			if i == 500 {
				t.Fatal("the waiter never entered the room")
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, waiting := holders(t, b, l, s, "b"), roomSize(t, b, l, s); n != 1 || waiting != 0 {
			t.Errorf("freed %s: after the release %d holders and %d waiting, want the waiter holding the slot", way.name, n, waiting)
		}
		if slot := <-got; slot != nil {
			slot.Release(ctx)
		}
	}
}

// roomSize counts the waiters in the room of bucket b of scope s.
func roomSize(t *testing.T, b *backend, l *Limiter, s string) int64 {
	t.Helper()
	n, err := b.client.ZCard(context.Background(), l.slotKeys(slotKey{s, "b"})[1]).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testSlotsOfADeadProcessExpire: slots that stop being renewed (their
// process died) are free again after SlotTTL, and not before; slots that
// are renewed never expire.
func testSlotsOfADeadProcessExpire(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC))
	dead, alive := b.limiter(t, WithClock(clock.Now)), b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	for range 2 {
		slot := mustTake(t, ctx, dead, s, 2, 0)
		dead.keeper.drop(slot) // as if its process had been killed
	}
	clock.Add(SlotTTL - time.Millisecond)
	if _, err := alive.TakeSlot(ctx, s, "b", 2, 0); err == nil {
		t.Fatal("a slot was free before its holder's TTL had passed")
	}
	clock.Add(2 * time.Millisecond)
	slot := mustTake(t, ctx, alive, s, 2, 0)
	// A held slot is renewed every SlotRenewal: it outlives many TTLs.
	for range 3 {
		clock.Add(SlotTTL / 2)
		if _, err := slot.run(ctx, "renew", slot.id); err != nil {
			t.Fatal(err)
		}
	}
	mustTake(t, ctx, alive, s, 2, 0)
	if _, err := alive.TakeSlot(ctx, s, "b", 2, 0); err == nil {
		t.Error("a renewed slot expired")
	}
}

// testSlotsUnderLoad: 24 goroutines in two limiters share a cap of 5:
// never more than 5 hold a slot, and every one gets its turn.
func testSlotsUnderLoad(t *testing.T, b *backend) {
	ctx := context.Background()
	limiters := []*Limiter{b.limiter(t), b.limiter(t)}
	s := scope(t, "s")
	const capacity = 5
	var inFlight, most, calls atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			l := limiters[g%2]
			for range 5 {
				slot, err := l.TakeSlot(ctx, s, "b", capacity, 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inFlight.Add(-1)
				calls.Add(1)
				if err := slot.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > capacity || calls.Load() != 120 {
		t.Errorf("%d calls, at most %d in flight; want 120 and at most %d", calls.Load(), most.Load(), capacity)
	}
}
