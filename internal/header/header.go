// Package header reads the request and response headers that the
// Transport and the providers share: the bearer token a scope is derived
// from, and the Retry-After an upstream refuses with.
package header

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Bearer returns the token of an "Authorization: Bearer" header, or "".
func Bearer(req *http.Request) string {
	h := req.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// maxRetryAfter is the longest Retry-After taken at its word: a longer one,
// in seconds or as a date, is a broken or hostile header, and pausing a
// quota for years on its say-so would stop every worker.
const maxRetryAfter = 365 * 24 * time.Hour

// RetryAfter reads a Retry-After header, in seconds or as an HTTP date, as
// a duration from now. It reports false for an empty or unusable value,
// and for one more than a year ahead.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > int64(maxRetryAfter/time.Second) {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := max(t.Sub(now), 0)
		if d > maxRetryAfter {
			return 0, false
		}
		return d, true
	}
	return 0, false
}
