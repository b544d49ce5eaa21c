// Package forecast is the arithmetic behind operators' foresight: from what
// a status read already returns for a window (a [quota.Usage]) and the
// window's log of slices, it tells the rate of spending now, when the window
// would be spent at that rate, how that compares with when units come back,
// and whether a burn-rate alert or a threshold of the limit fires.
//
// It reads nothing and writes nothing: `tollgate status` (text, -json and
// -check), the Transport's Trace alerts, the OpenTelemetry instruments of
// extra/tollgateotel and the operators' page read Redis and hand the figures
// here, so that all of them say the same thing in the same words.
//
// The entry points:
//
//   - [Of] forecasts a window (sliding, calendar day or fixed) at the rate
//     its own log shows over [Span]; [AtRate] does it at a rate the caller
//     gives. [Forecast.Text] says it in one sentence.
//   - [BucketAt] does the same for a token bucket, which keeps no log: its
//     level, when it is full again, and whether a rate of spending the
//     caller gives outruns the refill.
//   - [BurnRate] is the multiwindow burn-rate alert of Google's SRE
//     workbook: it fires when the rates over a long and a short span
//     ([BurnSpans]) both spend the window before its units come back.
//   - [Thresholds] reports each crossing of a fraction of a limit (say 80%
//     and 95%) once per window.
//
// Every function takes the instant as a value (the Usage's Now) and is
// deterministic; only [Thresholds] keeps state.
package forecast

import (
	"math"
	"sort"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A Slice is units counted in a window's log at one instant: a closed slice
// of the log, the open slice, or a hold dated in the future. The units
// leave a sliding window at At plus its length.
type Slice struct {
	// At is the instant the units are dated at: the latest call of the
	// slice, e.g. 14:05:02.120.
	At time.Time
	// Units is the units counted there, e.g. 300.
	Units int64
}

// The bounds of [Span].
const (
	// MinSpan is the shortest span a rate is measured over (unless the
	// window is shorter still): ten seconds hold a few status refreshes
	// and enough calls that one of them does not make the rate.
	MinSpan = 10 * time.Second
	// MaxSpan is the longest: an hour, the span an operator means by
	// "at this rate" and the long span of the SRE workbook's page alert,
	// so that a day's forecast follows the morning's ramp within the hour.
	MaxSpan = time.Hour
)

// Span returns the span [Of] measures a window's rate over: the last tenth
// of the window, at least [MinSpan] and at most [MaxSpan], and never longer
// than the window. A tenth holds a hundred of the log's slices (each a
// thousandth of the window), so the slices at its edge bend the rate by
// about one percent, and a change of pace shows within a tenth of the
// window. For a calendar day, window is the day's length.
func Span(window time.Duration) time.Duration {
	s := window / 10
	s = max(s, MinSpan)
	s = min(s, MaxSpan, window)
	return max(s, 0)
}

// Rate returns the units per second spent over span before now: the units
// of the slices dated in (now-span, now], divided by span. Holds dated
// after now are not spending yet and do not count. Rate is zero when span
// is not positive.
func Rate(slices []Slice, now time.Time, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	from := now.Add(-span)
	var sum int64
	for _, s := range slices {
		if s.At.After(from) && !s.At.After(now) {
			sum += s.Units
		}
	}
	return float64(sum) / span.Seconds()
}

// A Forecast is what becomes of one window at a steady rate of spending.
type Forecast struct {
	// Now is the instant forecast from: the Usage's Now.
	Now time.Time
	// Rate is the units per second spent now, e.g. 0.23.
	Rate float64
	// Span is what Rate was measured over, e.g. an hour; zero when the
	// caller gave the rate (AtRate).
	Span time.Duration
	// Spent is when the window would be spent at Rate: its count reaches
	// the limit. Now when it is spent already; zero when it never is (a
	// rate of zero, or a sliding window whose units leave as fast as
	// they come). For a calendar or fixed window it is where the rate
	// leads, even past the reset (then Early is false).
	Spent time.Time
	// Back is when units come back: the reset, for a calendar or fixed
	// window; for a sliding window, the first instant from Spent on at
	// which counted units leave (zero when Spent is).
	Back time.Time
	// Early reports that the window is spent before its units come back:
	// calls will wait or be refused from Spent until Back.
	Early bool
	// Kind is how the window counts, for the sentence: "reset" for a
	// calendar or fixed window, "sliding" for a sliding one, "bucket" for
	// a token bucket (Of does not forecast those: see BucketAt).
	Kind string
}

// Before is how long before its units come back the window is spent,
// e.g. 9h58m; zero unless Early.
func (f Forecast) Before() time.Duration {
	if !f.Early {
		return 0
	}
	return f.Back.Sub(f.Spent)
}

// Of forecasts the window of u at the rate its log shows over [Span] of the
// window (of the part of a calendar day or fixed window elapsed, when
// shorter). slices is the window's log (order does not matter). A token
// bucket keeps no log: Of returns a Forecast that is never spent, with
// Kind "bucket"; use [BucketAt] for it.
func Of(u quota.Usage, slices []Slice) Forecast {
	span := measured(u.Limit, u.Now, Span(length(u.Limit, u.Now)))
	f := AtRate(u, slices, Rate(slices, u.Now, span))
	f.Span = span
	return f
}

// AtRate forecasts the window of u at rate units per second. For a
// calendar or fixed window the count grows from u.Used at rate until the
// reset. For a sliding window it grows at rate while the recorded slices
// leave as they age (and what spending at rate adds leaves a window after
// it is spent): Spent is the first instant the count reaches the limit.
// Units of u.Used that slices do not account for are taken to leave at
// u.Reset, when everything counted now has left.
func AtRate(u quota.Usage, slices []Slice, rate float64) Forecast {
	lim := u.Limit
	f := Forecast{Now: u.Now, Rate: math.Max(rate, 0)}
	switch {
	case lim.Refill > 0:
		f.Kind = "bucket"
		return f
	case sliding(lim):
		f.Kind = "sliding"
		slide(&f, u, slices)
		return f
	}
	f.Kind = "reset"
	_, f.Back = bounds(lim, u.Now)
	left := float64(lim.Units - u.Used)
	switch {
	case left <= 0:
		f.Spent = u.Now
	case f.Rate > 0:
		f.Spent = u.Now.Add(seconds(left / f.Rate))
	}
	f.Early = !f.Spent.IsZero() && f.Spent.Before(f.Back)
	return f
}

// slide finds when a sliding window is spent: its count is the recorded
// slices still in the window plus what spending at f.Rate since Now adds,
// which grows until a window after Now and then holds at Rate times the
// window. Between two departures of recorded slices the count only grows,
// so each stretch is solved in closed form.
func slide(f *Forecast, u quota.Usage, slices []Slice) {
	w, now, limit := u.Limit.Window, u.Now, float64(u.Limit.Units)
	ramp := now.Add(w) // what is spent after now starts leaving here
	type leave struct {
		at    time.Time
		units float64
	}
	var leaves []leave
	var count float64
	for _, s := range slices {
		if s.Units > 0 && s.At.After(now.Add(-w)) {
			leaves = append(leaves, leave{s.At.Add(w), float64(s.Units)})
			count += float64(s.Units)
		}
	}
	if rest := float64(u.Used) - count; rest > 0 {
		at := u.Reset
		if !at.After(now) {
			at = ramp
		}
		leaves = append(leaves, leave{at, rest})
		count += rest
	}
	sort.Slice(leaves, func(i, j int) bool { return leaves[i].at.Before(leaves[j].at) })
	// back is when units come back once the window is spent at t: the
	// next departure after t, or t itself once spending leaves
	// continuously, a window after it began.
	back := func(t time.Time, i int) time.Time {
		b := t
		if b.Before(ramp) {
			b = ramp
		}
		for ; i < len(leaves); i++ {
			if leaves[i].at.After(t) {
				if leaves[i].at.Before(b) {
					b = leaves[i].at
				}
				break
			}
		}
		return b
	}
	if count >= limit {
		f.Spent, f.Back, f.Early = now, back(now, 0), true
		return
	}
	for i := 0; ; {
		// count holds the recorded units until leaves[i]; the spending
		// at Rate reaches the limit need seconds after now, if it does
		// so within a window of now (after that it adds no more).
		if f.Rate > 0 {
			need := (limit - count) / f.Rate
			if need <= w.Seconds() {
				t := now.Add(seconds(need))
				if i == len(leaves) || t.Before(leaves[i].at) {
					f.Spent, f.Back, f.Early = t, back(t, i), true
					return
				}
			}
		}
		if i == len(leaves) {
			return // the count holds from here on, short of the limit
		}
		at := leaves[i].at
		for ; i < len(leaves) && leaves[i].at.Equal(at); i++ {
			count -= leaves[i].units
		}
	}
}

// sliding reports that lim is decided as a sliding window: a fixed window
// with no end known yet is one too.
func sliding(lim quota.Limit) bool {
	return !lim.Calendar && lim.Refill <= 0 && (!lim.Fixed || lim.Ends.IsZero())
}

// bounds returns the calendar day or fixed window of lim that holds now:
// its start and its end (the reset). The fixed windows before and after
// the one ending at lim.Ends follow it by whole windows.
func bounds(lim quota.Limit, now time.Time) (start, end time.Time) {
	if lim.Calendar {
		loc := lim.Location
		if loc == nil {
			loc = time.UTC
		}
		y, m, d := now.In(loc).Date()
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	w := lim.Window
	if w <= 0 {
		return now, now
	}
	end = lim.Ends
	if !now.Before(end) {
		end = end.Add(w * (1 + now.Sub(end)/w))
	} else if back := end.Sub(now) / w; back > 0 {
		if end.Add(-back*w) == now {
			back--
		}
		end = end.Add(-back * w)
	}
	return end.Add(-w), end
}

// length returns the length of lim's window holding now: a calendar day's
// true length (23 or 25 hours at a daylight saving change).
func length(lim quota.Limit, now time.Time) time.Duration {
	if lim.Calendar {
		start, end := bounds(lim, now)
		return end.Sub(start)
	}
	return lim.Window
}

// measured clips span to the part of a calendar or fixed window elapsed at
// now: the log holds nothing from before its start, so a longer span would
// spread the window's units over time in which none could be counted.
func measured(lim quota.Limit, now time.Time, span time.Duration) time.Duration {
	if sliding(lim) || lim.Refill > 0 {
		return span
	}
	start, _ := bounds(lim, now)
	return min(span, now.Sub(start))
}

// seconds converts a float of seconds to a Duration, saturating far beyond
// any window.
func seconds(s float64) time.Duration {
	const most = float64(100 * 365 * 24 * time.Hour)
	return time.Duration(math.Min(s*float64(time.Second), most))
}
