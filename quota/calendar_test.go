package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testCalendarDays checks that a day limit resets at local midnight in its
// zone, including the 23- and 25-hour days at daylight saving changes.
func testCalendarDays(t *testing.T, b *backend) {
	la := mustLoad(t, "America/Los_Angeles")
	cases := []struct {
		name   string
		start  time.Time // a local midnight
		length time.Duration
	}{
		{"ordinary", time.Date(2026, 3, 5, 0, 0, 0, 0, la), 24 * time.Hour},
		{"spring forward", time.Date(2026, 3, 8, 0, 0, 0, 0, la), 23 * time.Hour},
		{"fall back", time.Date(2026, 11, 1, 0, 0, 0, 0, la), 25 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := testclock.New(c.start.Add(time.Second))
			l := b.limiter(t, WithClock(clock.Now))
			s := scope(t, "s")
			day := PerDay(10, la)
			if r := mustAllow(t, l, s, charge("pool", 10, day)); !r.OK() {
				t.Fatal("a fresh day refused its whole limit")
			}
			r := mustAllow(t, l, s, charge("pool", 1, day))
			if r.OK() {
				t.Fatal("admitted past the day's limit")
			}
			if got, want := r.RetryAfter(), c.length-time.Second; got != want {
				t.Errorf("RetryAfter = %v, want %v (the day lasts %v)", got, want, c.length)
			}
			if u := mustUsage(t, l, s, "pool", day); !u.Reset.Equal(c.start.Add(c.length)) {
				t.Errorf("Reset = %v, want %v", u.Reset.In(la), c.start.Add(c.length))
			}

			clock.Set(c.start.Add(c.length - time.Microsecond))
			if r := mustAllow(t, l, s, charge("pool", 1, day)); r.OK() {
				t.Error("admitted 1µs before midnight")
			}
			clock.Set(c.start.Add(c.length))
			if r := mustAllow(t, l, s, charge("pool", 10, day)); !r.OK() {
				t.Errorf("refused at midnight with RetryAfter %v", r.RetryAfter())
			}
		})
	}
}

// testHoldAcrossMidnight checks that a waiter may hold units of the next
// day, dated at its midnight, and that a shorter wait is refused with the
// time left until then.
func testHoldAcrossMidnight(t *testing.T, b *backend) {
	ctx := context.Background()
	la := mustLoad(t, "America/Los_Angeles")
	clock := testclock.New(time.Date(2026, 11, 1, 23, 30, 0, 0, la))
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	day := PerDay(5, la)
	mustAllow(t, l, s, charge("pool", 5, day))

	r, err := l.Reserve(ctx, s, 10*time.Minute, charge("pool", 1, day))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.RetryAfter() != 30*time.Minute {
		t.Errorf("10m wait: OK=%v RetryAfter=%v, want refused with 30m", r.OK(), r.RetryAfter())
	}
	r, err = l.Reserve(ctx, s, time.Hour, charge("pool", 5, day))
	if err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(2026, 11, 2, 0, 0, 0, 0, la)
	if !r.OK() || !r.Time().Equal(midnight) || r.Delay() != 30*time.Minute {
		t.Errorf("1h wait: OK=%v Time=%v Delay=%v, want a hold at %v", r.OK(), r.Time(), r.Delay(), midnight)
	}
	// The next day is now full too: the next waiter must wait for the day after.
	r, err = l.Reserve(ctx, s, -1, charge("pool", 1, day))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 3, 0, 0, 0, 0, la); !r.OK() || !r.Time().Equal(want) {
		t.Errorf("unbounded wait: OK=%v Time=%v, want a hold at %v", r.OK(), r.Time(), want)
	}
}

// TestMidnights checks the boundaries sent to the script on DST days.
func TestMidnights(t *testing.T) {
	la := mustLoad(t, "America/Los_Angeles")
	days := midnights(time.Date(2026, 3, 8, 12, 0, 0, 0, la), la)
	if len(days) != daysBefore+daysAfter+1 {
		t.Fatalf("got %d midnights, want %d", len(days), daysBefore+daysAfter+1)
	}
	today := days[daysBefore]
	if want := time.Date(2026, 3, 8, 0, 0, 0, 0, la); !today.Equal(want) {
		t.Errorf("today starts %v, want %v", today, want)
	}
	if got := days[daysBefore+1].Sub(today); got != 23*time.Hour {
		t.Errorf("2026-03-08 in Los Angeles lasts %v, want 23h", got)
	}
	for i := 1; i < len(days); i++ {
		if h, m, s := days[i].In(la).Clock(); h != 0 || m != 0 || s != 0 || !days[i].After(days[i-1]) {
			t.Errorf("boundary %d = %v, want a later local midnight", i, days[i].In(la))
		}
	}
}
