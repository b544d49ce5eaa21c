package forecast

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

var pacific = mustZone("America/Los_Angeles")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// spender is a steady spender: units in every slice of length every from
// from (its first slice ends at from+every) to to, each slice dated at its
// end, as the engine dates a slice at its latest call.
type spender struct {
	from, to time.Time
	every    time.Duration
	units    int64
}

// slices returns the spender's slices dated at or before until.
func (s spender) slices(until time.Time) []Slice {
	var out []Slice
	for t := s.from.Add(s.every); !t.After(s.to) && !t.After(until); t = t.Add(s.every) {
		out = append(out, Slice{At: t, Units: s.units})
	}
	return out
}

// usage returns what a status read at now tells of lim with slices
// recorded: the units counted in the window holding now.
func usage(lim quota.Limit, now time.Time, slices []Slice) quota.Usage {
	from := now.Add(-lim.Window)
	if !sliding(lim) {
		from, _ = bounds(lim, now)
		from = from.Add(-time.Nanosecond) // the window is [start, end)
	}
	var used int64
	for _, s := range slices {
		if s.At.After(from) && !s.At.After(now) {
			used += s.Units
		}
	}
	u := quota.Usage{Limit: lim, Now: now, Used: used, Remaining: max(lim.Units-used, 0)}
	if !sliding(lim) {
		_, u.Reset = bounds(lim, now)
	}
	return u
}

// slidingTruth finds, independently of the package's closed form, the first
// instant after now at which the sliding window of lim holds its limit:
// it steps through time by 1/3600 of the window (a second of an hour), counting the recorded slices
// and the slices the spenders go on to spend (their future slices, dated
// as they would be) within (t-W, t]. Zero when none does within two
// windows.
func slidingTruth(lim quota.Limit, now time.Time, recorded []Slice, future []spender) time.Time {
	all := append([]Slice(nil), recorded...)
	for _, s := range future {
		for _, f := range s.slices(now.Add(3 * lim.Window)) {
			if f.At.After(now) {
				all = append(all, f)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].At.Before(all[j].At) })
	// in counts the slices in (t-W, t]: slices from all[lo] to all[hi-1].
	var in int64
	lo, hi := 0, 0
	for t := now; !t.After(now.Add(2 * lim.Window)); t = t.Add(lim.Window / 3600) {
		for ; hi < len(all) && !all[hi].At.After(t); hi++ {
			in += all[hi].Units
		}
		for ; lo < hi && !all[lo].At.After(t.Add(-lim.Window)); lo++ {
			in -= all[lo].Units
		}
		if in >= lim.Units {
			return t
		}
	}
	return time.Time{}
}

// within reports whether got is within 5% of the time from now to want.
func within(got, want, now time.Time) bool {
	return math.Abs(got.Sub(want).Seconds()) <= 0.05*want.Sub(now).Seconds()
}

func TestSteadySpender(t *testing.T) {
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, pacific)
	hourEnd := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, pacific)
	sliceOfDay := 24 * time.Hour / 1000
	tests := []struct {
		name  string
		lim   quota.Limit
		now   time.Time
		spend spender
		// truth is the instant the spender's own count reaches the limit:
		// the first of its slices whose running total from the window's
		// start reaches lim.Units (calendar and fixed: resetTruth), or
		// slidingTruth's stepping (sliding).
		truth func(lim quota.Limit, now time.Time, s spender) time.Time
	}{{
		name:  "calendar day",
		lim:   quota.PerDay(9500, pacific),
		now:   now,
		spend: spender{from: day, to: day.Add(48 * time.Hour), every: sliceOfDay, units: 10},
		truth: resetTruth,
	}, {
		// 2026-11-01 lasts 25 hours in Los Angeles: daylight saving
		// time ends at 02:00.
		name:  "calendar day of 25 hours",
		lim:   quota.PerDay(9500, pacific),
		now:   time.Date(2026, 11, 1, 8, 0, 0, 0, pacific),
		spend: spender{from: time.Date(2026, 11, 1, 0, 0, 0, 0, pacific), to: time.Date(2026, 11, 2, 0, 0, 0, 0, pacific), every: 90 * time.Second, units: 10},
		truth: resetTruth,
	}, {
		name:  "fixed hour",
		lim:   quota.PerFixedWindow(1500, time.Hour, hourEnd),
		now:   hourEnd.Add(-40 * time.Minute),
		spend: spender{from: hourEnd.Add(-time.Hour), to: hourEnd, every: 3600 * time.Millisecond, units: 2},
		truth: resetTruth,
	}, {
		name:  "fixed hour, after its announced end",
		lim:   quota.PerFixedWindow(1500, time.Hour, hourEnd.Add(-2*time.Hour)),
		now:   hourEnd.Add(-40 * time.Minute),
		spend: spender{from: hourEnd.Add(-time.Hour), to: hourEnd, every: 3600 * time.Millisecond, units: 2},
		truth: resetTruth,
	}, {
		name:  "sliding hour, spending for 20 minutes",
		lim:   quota.PerWindow(1000, time.Hour),
		now:   now,
		spend: spender{from: now.Add(-20 * time.Minute), to: now.Add(2 * time.Hour), every: 3600 * time.Millisecond, units: 2},
		truth: func(lim quota.Limit, now time.Time, s spender) time.Time {
			return slidingTruth(lim, now, s.slices(now), []spender{s})
		},
	}, {
		name:  "sliding minute, spending for 30 seconds",
		lim:   quota.PerWindow(800, time.Minute),
		now:   now,
		spend: spender{from: now.Add(-30 * time.Second), to: now.Add(time.Hour), every: 60 * time.Millisecond, units: 1},
		truth: func(lim quota.Limit, now time.Time, s spender) time.Time {
			return slidingTruth(lim, now, s.slices(now), []spender{s})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorded := tt.spend.slices(tt.now)
			f := Of(usage(tt.lim, tt.now, recorded), recorded)
			want := tt.truth(tt.lim, tt.now, tt.spend)
			if !want.After(tt.now) {
				t.Fatalf("the test's spender spends the window at %v, not after now", want)
			}
			if !f.Early || !within(f.Spent, want, tt.now) {
				t.Errorf("Spent %v (early %v, rate %.4g/s over %v), want within 5%% of %v", f.Spent, f.Early, f.Rate, f.Span, want)
			}
			t.Logf("forecast %v, true %v: off by %.2f%% of the %v ahead", f.Spent.Format(time.TimeOnly), want.Format(time.TimeOnly),
				100*math.Abs(f.Spent.Sub(want).Seconds())/want.Sub(tt.now).Seconds(), want.Sub(tt.now))
		})
	}
}

// resetTruth is the instant a spender's running total reaches the limit,
// counted slice by slice from its start, which the tests place at the
// start of the calendar or fixed window holding now.
func resetTruth(lim quota.Limit, now time.Time, s spender) time.Time {
	var total int64
	for _, sl := range s.slices(s.to) {
		if total += sl.Units; total >= lim.Units {
			return sl.At
		}
	}
	return time.Time{}
}

func TestSlidingDepartures(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	burst := Slice{At: now.Add(-50 * time.Minute), Units: 900} // leaves at now+10m
	steady := spender{from: now.Add(-6 * time.Minute), to: now.Add(3 * time.Hour), every: 3600 * time.Millisecond, units: 1}
	tests := []struct {
		name      string
		units     int64
		spenders  []spender
		wantEarly bool
		wantBack  time.Time // checked when Early
	}{
		// 1000 counted, 100 more in 6 minutes: spent before the burst leaves.
		{"spent before the burst leaves", 1100, []spender{steady}, true, burst.At.Add(time.Hour)},
		// 200 more would take 12 minutes: the burst leaves at 10, and the
		// spender alone holds 1000 a window, short of 1200.
		{"the burst leaves first", 1200, []spender{steady}, false, time.Time{}},
		// A burst, then nothing: at a rate of zero, never spent.
		{"bursty then idle", 950, nil, false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := quota.PerWindow(tt.units, time.Hour)
			recorded := []Slice{burst}
			for _, s := range tt.spenders {
				recorded = append(recorded, s.slices(now)...)
			}
			u := usage(lim, now, recorded)
			u.Reset = burst.At.Add(time.Hour)
			f := Of(u, recorded)
			want := slidingTruth(lim, now, recorded, tt.spenders)
			if f.Early != tt.wantEarly || want.IsZero() == tt.wantEarly {
				t.Fatalf("Early %v (spent %v), truth %v; want early %v", f.Early, f.Spent, want, tt.wantEarly)
			}
			if !tt.wantEarly {
				if !f.Spent.IsZero() {
					t.Errorf("Spent %v, want zero (never)", f.Spent)
				}
				return
			}
			if !within(f.Spent, want, now) {
				t.Errorf("Spent %v, want within 5%% of %v", f.Spent, want)
			}
			if !f.Back.Equal(tt.wantBack) {
				t.Errorf("Back %v, want %v", f.Back, tt.wantBack)
			}
		})
	}
}

func TestNeverSpent(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// A spender of 1000 units an hour, for hours, in a window of 2000 an
	// hour: units leave as fast as they come.
	s := spender{from: now.Add(-5 * time.Hour), to: now.Add(5 * time.Hour), every: 3600 * time.Millisecond, units: 1}
	lim := quota.PerWindow(2000, time.Hour)
	recorded := s.slices(now)
	f := Of(usage(lim, now, recorded), recorded)
	if got := slidingTruth(lim, now, recorded, []spender{s}); !got.IsZero() {
		t.Fatalf("the test's spender spends the window at %v", got)
	}
	if f.Early || !f.Spent.IsZero() || f.Rate == 0 {
		t.Errorf("Spent %v, Early %v, Rate %v: want never, at a rate above zero", f.Spent, f.Early, f.Rate)
	}
	if got, want := f.Text(time.UTC), "at this rate, never spent: units leave as fast as they come"; got != want {
		t.Errorf("Text %q, want %q", got, want)
	}
}

func TestBurstyThenIdleDay(t *testing.T) {
	// 9000 of 9500 spent by 01:00, nothing since: the day's average would
	// spend it, the rate now does not.
	lim := quota.PerDay(9500, pacific)
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, pacific)
	recorded := []Slice{{At: time.Date(2026, 11, 26, 1, 0, 0, 0, pacific), Units: 9000}}
	f := Of(usage(lim, now, recorded), recorded)
	if f.Early || f.Rate != 0 || !f.Spent.IsZero() {
		t.Errorf("Early %v, Rate %v, Spent %v: want not early at rate 0", f.Early, f.Rate, f.Spent)
	}
	if got, want := f.Text(pacific), "at this rate, not spent before the reset on Fri Nov 27 at 00:00 PST: nothing spent lately"; got != want {
		t.Errorf("Text %q, want %q", got, want)
	}
}

func TestText(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 7, 0, 0, pacific)
	day := quota.PerDay(35880, pacific)
	tests := []struct {
		name  string
		u     quota.Usage
		slice []Slice
		rate  float64
		want  string
	}{
		// 35880 units at 1/s last 9h58m: 14:05, 9h55m before midnight.
		{"day spent early", quota.Usage{Limit: day, Now: now}, nil, 1,
			"at this rate, spent at 14:05 PST, 9h55m before the reset"},
		{"day lasts", quota.Usage{Limit: day, Now: now}, nil, 0.5,
			"at this rate, not spent before the reset on Fri Nov 27 at 00:00 PST: it would take 3m more"},
		{"day spent already", quota.Usage{Limit: day, Now: now, Used: 35880}, nil, 0,
			"spent already, 19h53m before the reset"},
		// Nothing counted, 60 a minute at 1 unit a second: full at 04:08,
		// and from then on units leave as fast as they come.
		{"sliding, full for good", quota.Usage{Limit: quota.PerWindow(60, time.Minute), Now: now}, nil, 1,
			"at this rate, spent at 04:08:00 PST, and units come back only as fast as they go"},
		// 90 counted of 100, 1 unit a second: 04:07:10, and the first
		// units counted leave at 04:07:30.
		{"sliding", quota.Usage{Limit: quota.PerWindow(100, time.Minute), Now: now, Used: 90},
			[]Slice{{At: now.Add(-30 * time.Second), Units: 40}, {At: now.Add(-10 * time.Second), Units: 50}}, 1,
			"at this rate, spent at 04:07:10 PST, 20s before units come back"},
		// 100 counted of 160 in a minute's window, 1 unit a second: the
		// 100 leave at 04:07:30, before the count reaches 160.
		{"sliding, never", quota.Usage{Limit: quota.PerWindow(160, time.Minute), Now: now, Used: 100},
			[]Slice{{At: now.Add(-30 * time.Second), Units: 100}}, 1,
			"at this rate, never spent: units leave as fast as they come"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AtRate(tt.u, tt.slice, tt.rate).Text(pacific); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFixedWithoutEndSlides(t *testing.T) {
	// Until its end is known, a fixed window is decided as a sliding one.
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	u := quota.Usage{Limit: quota.PerFixedWindow(100, time.Minute, time.Time{}), Now: now, Used: 60}
	f := AtRate(u, []Slice{{At: now.Add(-50 * time.Second), Units: 60}}, 1)
	if f.Kind != "sliding" || f.Early {
		t.Errorf("Kind %q, Early %v (spent %v); want sliding, never spent (the 60 leave at +10s)", f.Kind, f.Early, f.Spent)
	}
}

func TestSpan(t *testing.T) {
	for _, tt := range []struct{ window, want time.Duration }{
		{24 * time.Hour, time.Hour},
		{time.Hour, 6 * time.Minute},
		{time.Minute, 10 * time.Second},
		{5 * time.Second, 5 * time.Second},
	} {
		if got := Span(tt.window); got != tt.want {
			t.Errorf("Span(%v) = %v, want %v", tt.window, got, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{9*time.Hour + 58*time.Minute + 10*time.Second, "9h58m"},
		{2 * time.Hour, "2h"},
		{76 * time.Hour, "3d4h"},
		{150 * time.Second, "2m30s"},
		{4210 * time.Millisecond, "4.2s"},
		{350 * time.Millisecond, "350ms"},
		{-90 * time.Second, "-1m30s"},
	} {
		if got := Duration(tt.d); got != tt.want {
			t.Errorf("Duration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestRate(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	slices := []Slice{
		{At: now.Add(-2 * time.Minute), Units: 1000}, // before the span
		{At: now.Add(-time.Minute), Units: 1000},     // its first instant is out: (now-span, now]
		{At: now.Add(-30 * time.Second), Units: 30},
		{At: now, Units: 30},
		{At: now.Add(time.Second), Units: 1000}, // a hold: not spent yet
	}
	for _, tt := range []struct {
		span time.Duration
		want float64
	}{
		{time.Minute, 1},
		{2 * time.Minute, 1060.0 / 120},
		{0, 0},
	} {
		if got := Rate(slices, now, tt.span); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Rate over %v = %v, want %v", tt.span, got, tt.want)
		}
	}
}

func TestSlidingHold(t *testing.T) {
	// 60 counted 30 s ago and a hold of 30 dated 20 s ahead, of 100 a
	// minute: at 1 unit a second the 10 left are spent at now+10s, and
	// the 60 leave at now+30s. The hold is counted, not taken for spending.
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	u := quota.Usage{Limit: quota.PerWindow(100, time.Minute), Now: now, Used: 90}
	slices := []Slice{{At: now.Add(-30 * time.Second), Units: 60}, {At: now.Add(20 * time.Second), Units: 30}}
	f := AtRate(u, slices, 1)
	if !f.Early || !f.Spent.Equal(now.Add(10*time.Second)) || !f.Back.Equal(now.Add(30*time.Second)) {
		t.Errorf("Early %v, Spent %v, Back %v; want spent at +10s, back at +30s", f.Early, f.Spent, f.Back)
	}
	// Over Span(1m) = 10s nothing was spent: the hold is not spending.
	if got := Of(u, slices).Rate; got != 0 {
		t.Errorf("Of's rate %v, want 0", got)
	}
}
