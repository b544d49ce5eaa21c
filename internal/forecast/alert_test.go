package forecast

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

func TestBucketAt(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	lim := quota.TokenBucket(4000, 4000, time.Minute) // refills 66.67 a second
	tests := []struct {
		name        string
		level       int64
		reset       time.Time
		rate        float64
		wantFull    time.Time
		wantOutruns bool
		wantEmpty   time.Time
		wantText    string
	}{
		// 800 missing come back in 12 s; 80/s drains 13.33/s net: 3200
		// units last 240 s.
		{"outruns", 3200, now.Add(12 * time.Second), 80, now.Add(12 * time.Second), true, now.Add(240 * time.Second),
			"level 3200 of 4000, full again at 12:00:12 UTC; at this rate, empty at 12:04:00 UTC: spending 80/s outruns the refill of 66.7/s"},
		// No reset given: 800 missing at 66.67/s is 12 s too.
		{"keeps up", 3200, time.Time{}, 50, now.Add(12 * time.Second), false, time.Time{},
			"level 3200 of 4000, full again at 12:00:12 UTC; the refill of 66.7/s keeps up with spending 50/s"},
		{"full, idle", 4000, time.Time{}, 0, now, false, time.Time{}, "level 4000 of 4000"},
		{"empty, spending at the refill", 0, now.Add(time.Minute), 4000.0 / 60, now.Add(time.Minute), false, now,
			"level 0 of 4000, full again at 12:01:00 UTC; the refill of 66.7/s keeps up with spending 66.7/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := quota.Usage{Limit: lim, Now: now, Used: lim.Units - tt.level, Remaining: tt.level, Reset: tt.reset}
			b := BucketAt(u, tt.rate)
			if !b.Full.Equal(tt.wantFull) || b.Outruns != tt.wantOutruns || !b.Empty.Round(time.Millisecond).Equal(tt.wantEmpty) {
				t.Errorf("Full %v, Outruns %v, Empty %v; want %v, %v, %v", b.Full, b.Outruns, b.Empty, tt.wantFull, tt.wantOutruns, tt.wantEmpty)
			}
			if got := b.Text(time.UTC); got != tt.wantText {
				t.Errorf("Text %q, want %q", got, tt.wantText)
			}
		})
	}
}

func TestBurnRate(t *testing.T) {
	lim := quota.PerDay(10000, pacific)
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, pacific)
	now := day.Add(10 * time.Hour)
	slice := 24 * time.Hour / 1000
	tests := []struct {
		name      string
		recorded  []Slice
		wantLong  bool
		wantShort bool
	}{
		// 30 units a slice since 08:00: 1250 an hour, 2490 by now, and
		// the 7510 left are spent by 16:00. Both spans see it.
		{"burning", spender{from: day.Add(8 * time.Hour), to: now, every: slice, units: 30}.slices(now), true, true},
		// The same burn, stopped ten minutes ago: the long span still
		// sees it, the short one does not, so the alert stops.
		{"burn stopped", spender{from: day.Add(8 * time.Hour), to: now.Add(-10 * time.Minute), every: slice, units: 30}.slices(now), true, false},
		// A short burst now, on a quiet day (2 units a slice, 1032 by
		// now): 200 in the last five minutes spends the 8968 left within
		// the day at the short span's rate (0.69/s), not at the long
		// span's (0.079/s): no alert for a passing burst.
		{"a burst", append(
			spender{from: day, to: now, every: slice, units: 2}.slices(now),
			Slice{At: now.Add(-time.Minute), Units: 200}), false, true},
		{"quiet", spender{from: day, to: now, every: slice, units: 2}.slices(now), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := BurnRate(usage(lim, now, tt.recorded), tt.recorded)
			if b.Long.Early != tt.wantLong || b.Short.Early != tt.wantShort || b.Firing != (tt.wantLong && tt.wantShort) {
				t.Errorf("long %v (%.3g/s over %v), short %v (%.3g/s over %v), firing %v; want long %v, short %v",
					b.Long.Early, b.Long.Rate, b.Long.Span, b.Short.Early, b.Short.Rate, b.Short.Span, b.Firing, tt.wantLong, tt.wantShort)
			}
			if b.Long.Span != time.Hour || b.Short.Span != 5*time.Minute {
				t.Errorf("spans %v and %v, want 1h and 5m for a day", b.Long.Span, b.Short.Span)
			}
		})
	}
}

func TestThresholds(t *testing.T) {
	th, err := NewThresholds(0.95, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	day := quota.PerDay(100, pacific)
	hour := quota.PerWindow(100, time.Hour)
	at := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, pacific) }
	dayKey := Key{"proj", "pool", day.String()}
	hourKey := Key{"proj", "pool", hour.String()}
	steps := []struct {
		key  Key
		u    quota.Usage
		want []float64
	}{
		{dayKey, quota.Usage{Limit: day, Now: at(26, 8), Used: 50}, nil},
		{dayKey, quota.Usage{Limit: day, Now: at(26, 9), Used: 85}, []float64{0.8}},
		{dayKey, quota.Usage{Limit: day, Now: at(26, 10), Used: 90}, nil},
		{dayKey, quota.Usage{Limit: day, Now: at(26, 11), Used: 99}, []float64{0.95}},
		{dayKey, quota.Usage{Limit: day, Now: at(26, 12), Used: 100}, nil},
		// The next day, seen first when it is past both: both again.
		{dayKey, quota.Usage{Limit: day, Now: at(27, 20), Used: 96}, []float64{0.8, 0.95}},
		// A late read of the day before changes nothing.
		{dayKey, quota.Usage{Limit: day, Now: at(26, 23), Used: 10}, nil},
		{dayKey, quota.Usage{Limit: day, Now: at(27, 21), Used: 97}, nil},
		// A sliding window re-arms when its count falls below.
		{hourKey, quota.Usage{Limit: hour, Now: at(26, 8), Used: 81}, []float64{0.8}},
		{hourKey, quota.Usage{Limit: hour, Now: at(26, 9), Used: 70}, nil},
		{hourKey, quota.Usage{Limit: hour, Now: at(26, 10), Used: 82}, []float64{0.8}},
	}
	for i, s := range steps {
		got := th.Observe(s.key, s.u)
		var levels []float64
		for _, c := range got {
			if c.Key != s.key || c.Used != s.u.Used || c.Units != 100 || !c.At.Equal(s.u.Now) {
				t.Errorf("step %d: crossing %+v does not describe the usage read", i, c)
			}
			levels = append(levels, c.Threshold)
		}
		if fmt.Sprint(levels) != fmt.Sprint(s.want) {
			t.Errorf("step %d (%s, %d used at %v): crossed %v, want %v", i, s.key.Window, s.u.Used, s.u.Now, levels, s.want)
		}
	}
}

func TestThresholdsConcurrent(t *testing.T) {
	th, err := NewThresholds(0.8)
	if err != nil {
		t.Fatal(err)
	}
	lim := quota.PerDay(100, pacific)
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, pacific)
	var mu sync.Mutex
	var crossings int
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				u := quota.Usage{Limit: lim, Now: now.Add(time.Duration(i) * time.Second), Used: int64(80 + g%3)}
				n := len(th.Observe(Key{"proj", "pool", "day"}, u))
				mu.Lock()
				crossings += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if crossings != 1 {
		t.Errorf("%d crossings reported by 8 goroutines, want 1", crossings)
	}
}

func TestNewThresholdsRejects(t *testing.T) {
	for _, levels := range [][]float64{nil, {0}, {1.2}, {-0.5}, {0.8, 1.5}} {
		if _, err := NewThresholds(levels...); err == nil {
			t.Errorf("NewThresholds(%v) took it", levels)
		}
	}
}

func ExampleOf() {
	pacific, _ := time.LoadLocation("America/Los_Angeles")
	lim := quota.PerDay(10000, pacific)
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, pacific)
	// The log: 100 units every ten minutes since midnight, 6000 in all.
	var log []Slice
	var used int64
	for t := now.Add(-10 * time.Hour); t.Before(now); t = t.Add(10 * time.Minute) {
		log = append(log, Slice{At: t.Add(10 * time.Minute), Units: 100})
		used += 100
	}
	u := quota.Usage{Limit: lim, Now: now, Used: used, Remaining: lim.Units - used}
	f := Of(u, log)
	fmt.Printf("%.2f units/s over the last %v\n", f.Rate, f.Span)
	fmt.Println(f.Text(pacific))
	// Output:
	// 0.17 units/s over the last 1h0m0s
	// at this rate, spent at 16:40 PST, 7h20m before the reset
}
