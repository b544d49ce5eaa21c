package announce

import (
	"net/http"
	"time"
)

// RetryAfter reads a Retry-After field value, "HTTP-date / delay-seconds"
// (RFC 9110, section 10.2.3, https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3),
// as a duration from now: "120" is two minutes, and so is an HTTP-date two
// minutes after now (any of the three date formats of RFC 9110, section
// 5.6.7). It reports false for a value empty, unusable, negative, longer
// than 64 bytes, or more than a year ahead. A date already past reads as 0
// and true: retry now.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" || len(v) > 64 { // an IMF-fixdate has 29 bytes
		return 0, false
	}
	if isDigit(v[0]) { // delay-seconds = 1*DIGIT; no date starts with one
		return seconds(digits(v, maxSeconds))
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d > maxAhead {
		return 0, false
	}
	return max(d, 0), true
}

// retryAfterField reads the Retry-After header for Read. It is a singleton
// field, so when it appears on several lines they must all say the same.
func retryAfterField(h http.Header, now time.Time) (time.Duration, bool) {
	lines := h["Retry-After"]
	if n := fieldLength(lines); n == 0 || n > maxField {
		return 0, false
	}
	var d time.Duration
	for i, l := range lines {
		x, ok := RetryAfter(l, now)
		if !ok || (i > 0 && x != d) {
			return 0, false
		}
		d = x
	}
	return d, true
}
