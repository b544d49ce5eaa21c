package quota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// TestSeries: the slices a window counts, read on a real redis-server in
// this format and in format 2: every call's units at its instant, oldest
// first, whether in the log's list, the meta's closed slices or its open
// slice; a lease dated at its end, a hold in the future; nothing that has
// left the window; and the usage read at the same instant.
func TestSeries(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := s.Client(t)
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := testclock.New(t0.Add(-2 * time.Minute))
	l := mustNew(t, c, WithClock(clock.Now))
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		lim     Limit
		format2 bool
	}{
		{"sliding", PerWindow(1000, time.Minute), false},
		{"day", PerDay(100000, la), false},
		{"fixed", PerFixedWindow(1000, time.Hour, t0.Add(30*time.Minute)), false},
		{"format 2", PerWindow(1000, time.Minute), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scope := "series-" + tt.name
			allow := func(units int64) {
				t.Helper()
				ch := Demand{Bucket: "pool", Units: units, Limits: []Limit{tt.lim}}
				var r *Reservation
				var err error
				if tt.format2 {
					r, err = format2Allow(ctx, l, scope, 0, ch)
				} else {
					r, err = l.Allow(ctx, scope, ch)
				}
				if err != nil || !r.OK() {
					t.Fatalf("Allow at %v: %v, %v", clock.Now(), r, err)
				}
			}
			// Spent long before: gone from a sliding window. (The day
			// and the fixed window still count it.)
			clock.Set(t0.Add(-2 * time.Minute))
			allow(50)
			var want []access.Slice
			if !tt.lim.sliding() {
				want = append(want, access.Slice{At: clock.Now(), Units: 50})
			}
			// Twenty calls, each in a slice of its own (a thousandth of
			// the window): more than the meta's closed slices hold, so the
			// log's list has some too.
			step := max(2*time.Hour*24/1000, time.Second)
			if !tt.lim.Calendar {
				step = max(2*tt.lim.Window/1000, time.Second)
			}
			for i := range 20 {
				clock.Set(t0.Add(time.Duration(i) * step))
				allow(int64(i + 1))
				want = append(want, access.Slice{At: clock.Now(), Units: int64(i + 1)})
			}
			if !tt.format2 {
				// A lease, dated at its end; then a hold for later.
				if _, err := l.Lease(ctx, scope, Demand{Bucket: "pool", Units: 30, Limits: []Limit{tt.lim}}, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				want = append(want, access.Slice{At: clock.Now().Add(10 * time.Second), Units: 30})
			}
			clock.Add(time.Second)
			got, err := l.series(ctx, scope, "pool", tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got.Slices {
				got.Slices[i].At = got.Slices[i].At.UTC() // as want's, whatever the local zone
			}
			if fmt.Sprint(got.Slices) != fmt.Sprint(want) {
				t.Errorf("slices\n%v\nwant\n%v", got.Slices, want)
			}
			u, err := l.Usage(ctx, scope, "pool", tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, x := range want {
				sum += x.Units
			}
			if got.Used != u.Used || got.Used != sum || !got.Now.Equal(u.Now) || !got.Reset.Equal(u.Reset) ||
				!got.NextFree.Equal(u.NextFree) || got.Held != u.Held {
				t.Errorf("series' usage %+v, Usage %+v, want %d used", got, u, sum)
			}
		})
	}
}

// A token bucket keeps no log: its usage alone.
func TestSeriesTokenBucket(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	clock := testclock.New(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	l := mustNew(t, s.Client(t), WithClock(clock.Now))
	lim := TokenBucket(100, 100, time.Minute)
	if _, err := l.Allow(ctx, "s", Demand{Bucket: "b", Units: 40, Limits: []Limit{lim}}); err != nil {
		t.Fatal(err)
	}
	got, err := l.series(ctx, "s", "b", lim)
	if err != nil || got.Used != 40 || len(got.Slices) != 0 || got.Reset.IsZero() {
		t.Errorf("series of a token bucket: %+v, %v; want 40 used, a reset and no slices", got, err)
	}
}
