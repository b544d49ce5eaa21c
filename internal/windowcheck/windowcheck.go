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
