package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// Slots taken with a decision (ReserveCapped) and freed with a
// settlement (SettleAndRelease): tests of the behaviour suite
// (backend_test.go).

// holders returns how many slots of bucket's cap in scope Redis holds.
func holders(t *testing.T, b *backend, l *Limiter, scope, bucket string) int64 {
	t.Helper()
	n, err := b.client.ZCard(context.Background(), l.slotKeys(slotKey{scope, bucket})[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// roundTrips counts a client's round trips: each command sent alone, each
// pipeline once, less the commands refused with NOSCRIPT (a script's
// first run on a server is sent twice).
type roundTrips struct{ commandCount }

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// testCappedRoundTrips: a capped call settled costs Redis two round
// trips, one to take its units and slots, one to settle and free them; a
// capped call with nothing to settle frees each slot in one more. Slots
// on two caps cost no more.
func testCappedRoundTrips(t *testing.T, b *backend) {
	ctx := context.Background()
	c, _ := b.counted(t)
	count := &roundTrips{}
	c.AddHook(count)
	l := mustNew(t, c)
	s := scope(t, "s")
	caps := []Cap{{Bucket: "concurrent", N: 10}, {Bucket: "other", N: 3}}
	units := charge("core", 100, PerWindow(MaxUnits, time.Minute))
	for i := range 4 { // the first runs load the scripts
		before := count.n.Load()
		r, slots, err := l.ReserveCapped(ctx, s, 0, caps, units)
		if err != nil || !r.OK() || len(slots) != 2 {
			t.Fatalf("ReserveCapped: %v, %d slots", err, len(slots))
		}
		took := count.n.Load() - before
		before = count.n.Load()
		if err := r.SettleAndRelease(ctx, map[string]int64{"core": 17}, slots...); err != nil {
			t.Fatal(err)
		}
		settled := count.n.Load() - before
		before = count.n.Load()
		r, slots, err = l.ReserveCapped(ctx, s, 0, caps, units)
		if err != nil || !r.OK() {
			t.Fatal(err)
		}
		for _, slot := range slots {
			if err := slot.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		unsettled := count.n.Load() - before
		if i > 0 && (took != 1 || settled != 1 || unsettled != 3) {
			t.Errorf("run %d: %d round trips to take, %d to settle and free, %d to take and free one by one; want 1, 1, 3", i, took, settled, unsettled)
		}
		for _, cp := range caps {
			if n := holders(t, b, l, s, cp.Bucket); n != 0 {
				t.Fatalf("run %d: %d slots of %s still held", i, n, cp.Bucket)
			}
		}
	}
	if u := mustUsage(t, l, s, "core", PerWindow(MaxUnits, time.Minute)); u.Used != 4*(17+100) {
		t.Errorf("used %d, want %d: each settled call 17, each other 100", u.Used, 4*(17+100))
	}
}

// testCappedTogether: units refused take no slot, and a full cap charges
// no units; a settlement that changes nothing frees the slots all the
// same.
func testCappedTogether(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(150, time.Minute)
	caps := []Cap{{Bucket: "concurrent", N: 1}}
	r, slots, err := l.ReserveCapped(ctx, s, 0, caps, charge("core", 100, lim))
	if err != nil || !r.OK() || len(slots) != 1 {
		t.Fatalf("ReserveCapped: %v", err)
	}
	// The cap is full: refused, naming it, and no units charged.
	_, _, err = l.ReserveCapped(ctx, s, 0, caps, charge("core", 10, lim))
	var re *RefusedError
	if !errors.As(err, &re) || re.Bucket != "concurrent" {
		t.Fatalf("a full cap: %v, want a *RefusedError naming the cap", err)
	}
	if u := mustUsage(t, l, s, "core", lim); u.Used != 100 {
		t.Errorf("a call refused its slot charged units: %d used, want 100", u.Used)
	}
	if err := r.SettleAndRelease(ctx, map[string]int64{"core": 100}, slots...); err != nil {
		t.Fatal(err)
	}
	if n := holders(t, b, l, s, "concurrent"); n != 0 {
		t.Fatalf("a settlement with nothing to change kept its slot: %d held", n)
	}
	// The units are refused: no slot taken.
	r, slots, err = l.ReserveCapped(ctx, s, 0, caps, charge("core", 100, lim))
	if err != nil || r.OK() || slots != nil {
		t.Fatalf("units over the limit: %v, ok %v, %d slots", err, r != nil && r.OK(), len(slots))
	}
	if n := holders(t, b, l, s, "concurrent"); n != 0 {
		t.Errorf("refused units took a slot: %d held", n)
	}
	if _, _, err := l.ReserveCapped(ctx, s, 0, []Cap{{Bucket: "x", N: 0}}, charge("core", 1, lim)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a cap of 0: %v, want ErrInvalid", err)
	}
}

// testCappedWaitersFirst: a caller waiting for a slot (TakeSlot) is
// served before a decision that arrives later, and gets the slot a
// settlement frees.
func testCappedWaitersFirst(t *testing.T, b *backend) {
	ctx := context.Background()
	l, other := b.limiter(t), b.limiter(t)
	s := scope(t, "s")
	lim := PerWindow(MaxUnits, time.Minute)
	caps := []Cap{{Bucket: "b", N: 1}}
	r, slots, err := l.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim))
	if err != nil || !r.OK() {
		t.Fatal(err)
	}
	got := make(chan *Slot, 1)
	go func() {
		slot, err := other.TakeSlot(ctx, s, "b", 1, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- slot
	}()
	for i := 0; roomSize(t, b, l, s) == 0; i++ {
		if i == 1000 {
			t.Fatal("the waiter never entered the room")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, err := l.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim)); !errors.Is(err, ErrRefused) {
		t.Fatalf("a decision jumped the room: %v", err)
	}
	if err := r.SettleAndRelease(ctx, map[string]int64{"core": 0}, slots...); err != nil {
		t.Fatal(err)
	}
	select {
	case slot := <-got:
		if slot == nil {
			t.Fatal("the waiter got no slot")
		}
		if _, _, err := l.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim)); !errors.Is(err, ErrRefused) {
			t.Errorf("the waiter's slot was taken again: %v", err)
		}
		slot.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the slot freed by the settlement never reached the waiter")
	}
}

// testCappedDeadHolder: a slot taken with a decision by a process that
// died is free again after SlotTTL, and not before.
func testCappedDeadHolder(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC))
	dead, alive := b.limiter(t, WithClock(clock.Now)), b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := PerWindow(MaxUnits, time.Hour)
	caps := []Cap{{Bucket: "b", N: 2}}
	for range 2 {
		_, slots, err := dead.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim))
		if err != nil || len(slots) != 1 {
			t.Fatal(err)
		}
		dead.keeper.drop(slots[0]) // as if its process had been killed
	}
	clock.Add(SlotTTL - time.Millisecond)
	if _, _, err := alive.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim)); !errors.Is(err, ErrRefused) {
		t.Fatalf("a slot was free before its holder's TTL had passed: %v", err)
	}
	clock.Add(2 * time.Millisecond)
	r, slots, err := alive.ReserveCapped(ctx, s, 0, caps, charge("core", 1, lim))
	if err != nil || !r.OK() || len(slots) != 1 {
		t.Fatalf("a dead holder's slot was not freed: %v", err)
	}
	if u := mustUsage(t, alive, s, "core", lim); u.Used != 3 {
		t.Errorf("used %d, want 3: the refusal charged nothing", u.Used)
	}
	slots[0].Release(ctx)
}

// testCappedNeverExceeded: callers in three limiters, some taking their
// slots with their units, some with TakeSlot (waiting in the room), some
// freeing with the settlement, some on their own, some giving up early,
// share a cap of 4: never more than 4 hold a slot, and none is left held.
// Two limiters free slots in their shared pipelines (free.lua), the third
// with plain commands in a round trip of their own.
func testCappedNeverExceeded(t *testing.T, b *backend) {
	ctx := context.Background()
	limiters := []*Limiter{b.limiter(t), b.limiter(t), b.limiter(t, WithPipelines(0))}
	s := scope(t, "s")
	const capacity = 4
	caps := []Cap{{Bucket: "b", N: capacity}}
	lim := PerWindow(MaxUnits, time.Minute)
	var inFlight, most, calls atomic.Int64
	var wg sync.WaitGroup
	for g := range 18 {
		wg.Go(func() {
			l := limiters[g%3]
			for i := range 12 {
				var slot []*Slot
				var r *Reservation
				var err error
				switch (g + i) % 3 {
				case 0: // wait in the room
					var one *Slot
					one, err = l.TakeSlot(ctx, s, "b", capacity, 10*time.Second)
					slot = []*Slot{one}
				default:
					cctx, cancel := context.WithTimeout(ctx, time.Duration(g%4)*time.Millisecond+time.Millisecond)
					r, slot, err = l.ReserveCapped(cctx, s, 0, caps, charge("core", 1, lim))
					cancel()
					if err == nil && !r.OK() {
						t.Error("units refused under a limit never reached")
						return
					}
				}
				if err != nil {
					continue // refused, or gave up: nothing held
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Duration(1+i%3) * time.Millisecond)
				inFlight.Add(-1)
				calls.Add(1)
				if r != nil && i%2 == 0 {
					err = r.SettleAndRelease(ctx, map[string]int64{"core": 0}, slot...)
				} else {
					err = slot[0].Release(ctx)
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > capacity || calls.Load() < 18*4 {
		t.Errorf("%d calls, at most %d in flight; want at least %d and at most %d", calls.Load(), most.Load(), 18*4, capacity)
	}
	// A decision whose caller gave up is given back when its answer comes.
	for i := 0; holders(t, b, limiters[0], s, "b") != 0; i++ {
		if i == 200 {
			t.Fatalf("%d slots left held", holders(t, b, limiters[0], s, "b"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
