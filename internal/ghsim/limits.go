package ghsim

import (
	"net/http"
	"strconv"
	"time"
)

// fixedWindow is a primary window: it starts with the first request after
// the last reset and ends at a whole second (GitHub announces resets "in
// UTC epoch seconds"), at most its length after it started; a window
// shorter than a second ends a length after it started, which the
// announced reset can only round.
type fixedWindow struct {
	start, reset time.Time
	used, limit  int64
}

func newFixedWindow(now time.Time, length time.Duration, limit int64) *fixedWindow {
	reset := now.Add(length).Truncate(time.Second)
	if !reset.After(now) {
		reset = now.Add(length)
	}
	return &fixedWindow{start: now, reset: reset, limit: limit}
}

// announce writes the window's state as GitHub's headers.
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#checking-the-status-of-your-rate-limit
func (w *fixedWindow) announce(h http.Header, u *user, resource string) {
	if resource == "" {
		resource = Core
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(w.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(w.limit-w.used, 0), 10))
	h.Set("X-RateLimit-Used", strconv.FormatInt(w.used, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(resetSecond(w.reset), 10))
	h.Set("X-RateLimit-Resource", resource)
}

// resetSecond is a reset in epoch seconds, rounded up: a reset announced
// never comes before the real one.
func resetSecond(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// report describes the window for Server.Windows.
func (w *fixedWindow) report(identity, resource string) Window {
	return Window{Identity: identity, Resource: resource, Start: w.start, Reset: w.reset, Used: w.used, Limit: w.limit}
}

// slidingLog counts units in a sliding window: for every instant T, the
// units recorded in (T-window, T].
type slidingLog struct {
	at    []time.Time
	units []int64
	sum   int64
}

// drop forgets what fell out of the window ending at now.
func (l *slidingLog) drop(now time.Time, window time.Duration) {
	i := 0
	for i < len(l.at) && !l.at[i].After(now.Add(-window)) {
		l.sum -= l.units[i]
		i++
	}
	l.at, l.units = l.at[i:], l.units[i:]
}

// room returns 0 when units fit the limit now, else how long until they
// do.
func (l *slidingLog) room(now time.Time, window time.Duration, limit, units int64) time.Duration {
	l.drop(now, window)
	excess := l.sum + units - limit
	if excess <= 0 {
		return 0
	}
	for i, u := range l.units {
		excess -= u
		if excess <= 0 {
			return l.at[i].Add(window).Sub(now)
		}
	}
	return window // more units than the limit: never, but say a window
}

// add records units at now.
func (l *slidingLog) add(now time.Time, units int64) {
	l.at = append(l.at, now)
	l.units = append(l.units, units)
	l.sum += units
}
