package quota

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestCancelledHoldLeavesNoQueue: in a calendar day, a hold shares its
// slice with the units spent before it. Once it is given back, a request
// decided next is placed by the room it finds, not behind the instant of
// the hold that is gone: a pause dated the hold 30s ahead, and after the
// pause is lifted and the hold given back, the next request is admitted
// at once. (The slice kept the hold's instant as its newest entry's, and
// every request after it queued there, as behind a hold still waiting.)
func TestCancelledHoldLeavesNoQueue(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	var mu sync.Mutex
	now := time.Date(2026, 11, 2, 0, 0, 1, 0, time.UTC) // a slice of 86.4s starts at midnight
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := mustNew(t, c, WithClock(clock))
	ctx := context.Background()
	charge := Demand{Bucket: "b", Units: 1, Limits: []Limit{PerDay(1000, time.UTC)}}

	if r, err := l.Reserve(ctx, "s", 0, charge); err != nil || !r.OK() || r.Delay() != 0 {
		t.Fatalf("first request: %v, %v; want admitted now", r, err)
	}
	if _, err := l.PauseBecause(ctx, "s", "", 30*time.Second, "rotation"); err != nil {
		t.Fatal(err)
	}
	hold, err := l.Reserve(ctx, "s", time.Minute, charge)
	if err != nil || !hold.OK() || hold.Delay() != 30*time.Second {
		t.Fatalf("during the pause: %v, %v; want a hold 30s ahead", hold, err)
	}
	if _, err := l.resume(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	if err := hold.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	r, err := l.Reserve(ctx, "s", time.Minute, charge)
	if err != nil || !r.OK() {
		t.Fatalf("after the resume: %v, %v", r, err)
	}
	if r.Delay() != 0 {
		t.Errorf("after the resume and the hold given back, a request waits %v, want none", r.Delay())
	}
	u, err := l.Usage(ctx, "s", "b", charge.Limits[0])
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 2 {
		t.Errorf("the day counts %d units, want 2", u.Used)
	}
}

// TestCancelHoldsOfOneSliceOfADay: three holds dated 30s ahead by a pause
// share a day's slice with the units spent before them; given back one
// after the other, each finds its units, and the day counts only what was
// spent.
func TestCancelHoldsOfOneSliceOfADay(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	now := time.Date(2026, 11, 2, 0, 0, 1, 0, time.UTC)
	l := mustNew(t, c, WithClock(func() time.Time { return now }))
	ctx := context.Background()
	charge := Demand{Bucket: "b", Units: 2, Limits: []Limit{PerDay(1000, time.UTC)}}
	if r, err := l.Reserve(ctx, "s", 0, charge); err != nil || !r.OK() {
		t.Fatalf("first request: %v, %v", r, err)
	}
	if _, err := l.PauseBecause(ctx, "s", "", 30*time.Second, "rotation"); err != nil {
		t.Fatal(err)
	}
	var holds []*Reservation
	for range 3 {
		h, err := l.Reserve(ctx, "s", time.Minute, charge)
		if err != nil || !h.OK() || h.Delay() != 30*time.Second {
			t.Fatalf("during the pause: %v, %v; want a hold 30s ahead", h, err)
		}
		holds = append(holds, h)
	}
	for _, h := range holds {
		if err := h.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	u, err := l.Usage(ctx, "s", "b", charge.Limits[0])
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 2 || u.Held != 0 {
		t.Errorf("after the holds were given back, the day counts %d units, %d held; want 2, none held", u.Used, u.Held)
	}
}
