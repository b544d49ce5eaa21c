package openai

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// OpenAI answers 429 for two different things (error codes guide,
// https://platform.openai.com/docs/guides/error-codes):
//
//   - "429 - Rate limit reached for requests | Cause: You are sending
//     requests too quickly.": error code rate_limit_exceeded, with the
//     x-ratelimit-* headers and, "when present", Retry-After: "The minimum
//     number of seconds to wait before retrying a temporary rate-limit
//     error" (rate limits guide,
//     https://developers.openai.com/api/docs/guides/rate-limits). The
//     model's bucket that ran out pauses for every worker.
//   - "429 - You exceeded your current quota, please check your plan and
//     billing details | Cause: You have run out of credits or hit your
//     maximum monthly spend.": type (and, since late 2023, code)
//     insufficient_quota. Waiting does not mend it, and the rate limits
//     guide says "Don't retry quota, billing, or other errors that require
//     you to take action": the Transport returns a *BillingError and
//     pauses nothing.
//
// A 429 whose body is neither (Azure OpenAI's, a gateway's) is read as a
// rate limit. One whose message says "Request too large" (a single request
// over the TPM limit) is neither paused nor retried: it is returned as it
// is, since others' requests still fit.

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 16 << 10

// apiError is OpenAI's error body: {"error": {"message", "type", "param",
// "code"}}; code may be null, a string, or (from Azure) a number.
type apiError struct {
	Error *struct {
		Message any `json:"message"`
		Type    any `json:"type"`
		Code    any `json:"code"`
	} `json:"error"`
}

// errorOf reads an error body's type, code and message; "" for what it
// does not say, or for a body that is not such JSON.
func errorOf(body []byte) (typ, code, message string) {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return "", "", ""
	}
	str := func(v any) string { s, _ := v.(string); return s }
	return str(e.Error.Type), str(e.Error.Code), str(e.Error.Message)
}

// Upstream returns the tollgate.UpstreamFunc of NewTransport's Transport:
//
//   - a 429 rate limit pauses, in the request's scope (its pool and
//     model), the bucket the headers say is spent (x-ratelimit-remaining-
//     requests or -tokens of 0), or that the error's type names
//     ("requests", "tokens"), or else both; for Retry-After-Ms or
//     Retry-After when sent, else until the spent bucket's
//     x-ratelimit-reset-*, else DefaultRatePause;
//   - a 429 insufficient_quota, or "Request too large", and every other
//     response, pause nothing.
//
// Only 429 bodies are read, and they are left whole for the caller.
func Upstream() tollgate.UpstreamFunc {
	return func(resp *http.Response, _ costs.Endpoint) tollgate.Verdict {
		if resp.StatusCode != http.StatusTooManyRequests {
			return tollgate.Verdict{}
		}
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		typ, code, message := errorOf(body)
		if typ == "insufficient_quota" || code == "insufficient_quota" || strings.HasPrefix(message, "Request too large") {
			return tollgate.Verdict{}
		}
		now := time.Now()
		var buckets []string
		for _, b := range []string{Requests, Tokens} {
			if remaining(resp.Header, b) == 0 {
				buckets = append(buckets, b)
			}
		}
		if len(buckets) == 0 && (typ == Requests || typ == Tokens) {
			buckets = []string{typ}
		}
		d, ok := retryAfter(resp.Header, now)
		if !ok {
			for _, b := range buckets {
				if r, known := resetOf(resp.Header, b); known {
					d, ok = max(d, r), true
				}
			}
		}
		if !ok {
			d = DefaultRatePause
		}
		return tollgate.Verdict{Spent: true, Buckets: buckets, Pause: max(d, minPause)}
	}
}

// minPause is the shortest pause: "try again in 0s" still means not now.
const minPause = 10 * time.Millisecond

// maxPause bounds the waits read from headers: longer is a broken or
// hostile header.
const maxPause = 365 * 24 * time.Hour

// remaining reads x-ratelimit-remaining-<bucket>, or -1.
func remaining(h http.Header, bucket string) int64 {
	v := strings.TrimSpace(h.Get("X-Ratelimit-Remaining-" + bucket))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// resetOf reads x-ratelimit-reset-<bucket>, a Go duration such as "6m0s"
// or "12ms" (rate limits guide).
func resetOf(h http.Header, bucket string) (time.Duration, bool) {
	d, err := time.ParseDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + bucket)))
	if err != nil || d < 0 || d > maxPause {
		return 0, false
	}
	return d, true
}

// retryAfter reads Retry-After-Ms (milliseconds, as OpenAI's SDKs read it
// first) or Retry-After (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err == nil && ms >= 0 && !math.IsInf(ms, 0) && ms <= float64(maxPause/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	return header.RetryAfter(h.Get("Retry-After"), now)
}
