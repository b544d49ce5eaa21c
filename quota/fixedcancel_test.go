package quota

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestCancelHoldsOfSeveralFixedWindows: holds waiting in the next fixed
// window and in the one after it are given back, all of them, whatever
// order they are cancelled in: a request then decided finds the next
// window empty. (The slices of a fixed window start at its own start;
// the meta's grid is the newest entry's, the window after, and a hold of
// the window before it was not found, so its units stayed counted.)
func TestCancelHoldsOfSeveralFixedWindows(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	l := mustNew(t, c)
	ctx := context.Background()
	const window = time.Hour // long: nothing here depends on timing
	ends := time.Now().Add(window / 2)
	charge := func(units int64) Demand {
		return Demand{Bucket: "b", Units: 1, Limits: []Limit{PerFixedWindow(units, window, ends)}}
	}
	var holds []*Reservation
	for i := range 6 { // 2 now, 2 in the next window, 2 in the one after
		r, err := l.Reserve(ctx, "s", 3*window, charge(2))
		if err != nil || !r.OK() {
			t.Fatalf("reservation %d: %v, %v", i, r, err)
		}
		if want := time.Until(ends.Add(time.Duration(i/2-1) * window)); i >= 2 && (r.Delay() < want-time.Minute || r.Delay() > want+time.Minute) {
			t.Fatalf("reservation %d waits %v, want about %v", i, r.Delay(), want)
		}
		if i >= 2 {
			holds = append(holds, r)
		}
	}
	for _, r := range holds { // the next window's first, then the one after's
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r, err := l.Reserve(ctx, "s", 3*window, charge(2))
	if err != nil || !r.OK() {
		t.Fatalf("after the holds were given back: %v, %v", r, err)
	}
	if want := time.Until(ends); r.Delay() > want+time.Minute {
		t.Errorf("after every hold was given back, a request waits %v, want the next window, in about %v", r.Delay(), want)
	}
}
