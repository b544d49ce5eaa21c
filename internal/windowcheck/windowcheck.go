// Package windowcheck measures, for tests, the most units any sliding
// window of a run held: the figure a quota promises to keep under its
// limit.
package windowcheck

import (
	"slices"
	"time"
)

// A Call is units spent at an instant: admitted, or arrived upstream.
type Call struct {
	At    time.Time
	Units int64
}

// Most returns the most units dated within any window (T-w, T], and that
// window's end T. The most is reached at some call's instant, so the
// windows ending at each call are the ones to check. calls need not be
// sorted.
func Most(calls []Call, w time.Duration) (most int64, end time.Time) {
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b Call) int { return a.At.Compare(b.At) })
	var sum int64
	lo := 0
	for hi := range calls {
		sum += calls[hi].Units
		for !calls[lo].At.After(calls[hi].At.Add(-w)) {
			sum -= calls[lo].Units
			lo++
		}
		if sum > most {
			most, end = sum, calls[hi].At
		}
	}
	return most, end
}

// A Span is a stretch of time, [From, Till).
type Span struct {
	From, Till time.Time
}

// Before returns the parts of spans before end.
func Before(spans []Span, end time.Time) []Span {
	var out []Span
	for _, s := range spans {
		if s.Till.After(end) {
			s.Till = end
		}
		if s.Till.After(s.From) {
			out = append(out, s)
		}
	}
	return out
}

// Fill is how full a sliding window was over the instants Filled sampled.
type Fill struct {
	Instants int       // how many instants were sampled
	Mean     float64   // the units the window held, on average
	Least    int64     // the fewest units it held at one of them
	LeastAt  time.Time // and the first instant it held that few
}

// Filled samples, every step within spans (overlapping or not), the units
// dated within the window (T-w, T] ending at each instant T.
func Filled(calls []Call, w, step time.Duration, spans []Span) Fill {
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b Call) int { return a.At.Compare(b.At) })
	sums := make([]int64, len(calls)+1) // sums[i]: the units of calls[:i]
	for i, c := range calls {
		sums[i+1] = sums[i] + c.Units
	}
	// upTo returns how many calls are dated at or before t.
	upTo := func(t time.Time) int {
		i, _ := slices.BinarySearchFunc(calls, t, func(c Call, t time.Time) int {
			if c.At.After(t) {
				return 1
			}
			return -1
		})
		return i
	}
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.From.Compare(b.From) })
	var f Fill
	var total float64
	var next time.Time // the first instant not sampled yet
	for _, s := range spans {
		t := s.From
		if t.Before(next) {
			t = next
		}
		for ; t.Before(s.Till); t = t.Add(step) {
			held := sums[upTo(t)] - sums[upTo(t.Add(-w))]
			if f.Instants == 0 || held < f.Least {
				f.Least, f.LeastAt = held, t
			}
			f.Instants++
			total += float64(held)
		}
		if t.After(next) {
			next = t
		}
	}
	if f.Instants > 0 {
		f.Mean = total / float64(f.Instants)
	}
	return f
}

// Minus returns the parts of spans that no span of cut covers.
func Minus(spans, cut []Span) []Span {
	out := slices.Clone(spans)
	for _, c := range cut {
		var next []Span
		for _, s := range out {
			if !c.From.Before(s.Till) || !s.From.Before(c.Till) { // apart
				next = append(next, s)
				continue
			}
			if s.From.Before(c.From) {
				next = append(next, Span{s.From, c.From})
			}
			if c.Till.Before(s.Till) {
				next = append(next, Span{c.Till, s.Till})
			}
		}
		out = next
	}
	return out
}
