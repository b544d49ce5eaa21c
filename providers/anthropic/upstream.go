package anthropic

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// What Anthropic's answers say of the quota (errors page,
// https://docs.anthropic.com/en/api/errors; rate limits page,
// https://docs.anthropic.com/en/api/rate-limits):
//
//   - 429 rate_limit_error: "Your account has hit a rate limit", with
//     retry-after, "the number of seconds to wait until you can retry the
//     request": the class's bucket that ran out (its
//     anthropic-ratelimit-*-remaining is 0) pauses for every worker.
//   - 529 overloaded_error: "Anthropic's API is temporarily overloaded",
//     for every user at once: not the organization's quota. Nothing is
//     paused; the answer is returned as it is.
//   - 413 request_too_large: one request over the size limit; others
//     still fit. Nothing is paused.

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 16 << 10

// errorType reads an error body's error.type, e.g. "rate_limit_error"; ""
// for a body that is not such JSON.
func errorType(body []byte) string {
	var e struct {
		Error *struct {
			Type any `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return ""
	}
	s, _ := e.Error.Type.(string)
	return s
}

// headerNames are the buckets' names in the anthropic-ratelimit-* headers.
var headerNames = map[string]string{Requests: "Requests", InputTokens: "Input-Tokens", OutputTokens: "Output-Tokens"}

// Upstream returns the tollgate.UpstreamFunc of NewTransport's Transport:
// a 429 whose error type is rate_limit_error (or that is not Anthropic's
// JSON: a gateway's) pauses, in the request's scope (its pool and model
// class), the buckets whose anthropic-ratelimit-*-remaining is 0, or the
// whole scope when none is; for retry-after when sent, else until the
// spent buckets' reset, else DefaultRatePause. Every other answer, 529
// overloaded_error and 413 request_too_large among them, pauses nothing.
// Only 429 bodies are read, and they are left whole for the caller.
func Upstream() tollgate.UpstreamFunc {
	return func(resp *http.Response, _ costs.Endpoint) tollgate.Verdict {
		if resp.StatusCode != http.StatusTooManyRequests {
			return tollgate.Verdict{}
		}
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		if typ := errorType(body); typ != "" && typ != "rate_limit_error" {
			return tollgate.Verdict{}
		}
		now := time.Now()
		var buckets []string
		for _, b := range []string{Requests, InputTokens, OutputTokens} {
			if remaining(resp.Header, b) == 0 {
				buckets = append(buckets, b)
			}
		}
		d, ok := header.RetryAfter(resp.Header.Get("Retry-After"), now)
		if !ok {
			for _, b := range buckets {
				if at, known := resetOf(resp.Header, b); known {
					d, ok = max(d, at.Sub(now)), true
				}
			}
		}
		if !ok {
			d = DefaultRatePause
		}
		return tollgate.Verdict{Spent: true, Buckets: buckets, Pause: min(max(d, minPause), maxPause), Reason: "rate_limit_error"}
	}
}

// minPause is the shortest pause: a retry-after of 0 still means not now.
const minPause = 10 * time.Millisecond

// maxPause bounds the waits read from headers: longer is a broken or
// hostile header.
const maxPause = 365 * 24 * time.Hour

// remaining reads anthropic-ratelimit-<bucket>-remaining, or -1.
func remaining(h http.Header, bucket string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+headerNames[bucket]+"-Remaining")), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// resetOf reads anthropic-ratelimit-<bucket>-reset, an RFC 3339 instant.
func resetOf(h http.Header, bucket string) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+headerNames[bucket]+"-Reset")))
	return at, err == nil
}
