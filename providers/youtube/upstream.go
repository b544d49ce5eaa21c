package youtube

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// DefaultRatePause is how long a project pauses after a rate-limit error
// (rateLimitExceeded, userRateLimitExceeded, userRequestsExceedRateLimit, a
// 429) that says nothing of when to retry.
const DefaultRatePause = 10 * time.Second

// maxErrorBody bounds how much of an error response is read: YouTube's are
// well under a kilobyte.
const maxErrorBody = 16 << 10

// The reasons of YouTube's error bodies that speak of quota. The rest, e.g.
// forbidden and insufficientPermissions (403 too), do not. Google's tables
// of reasons: https://developers.google.com/youtube/v3/docs/errors,
// https://developers.google.com/youtube/v3/docs/core_errors and
// https://developers.google.com/youtube/v3/live/docs/errors.
const (
	// 403: the project's quota is spent until midnight Pacific time
	// (docs/errors; core_errors).
	reasonQuotaExceeded = "quotaExceeded"
	// 403: the older, project-level form of the same; its message says
	// "The quota will be reset at midnight Pacific Time (PT)" (core_errors).
	reasonDailyLimit = "dailyLimitExceeded"
	// 403 or 429: "Too many requests have been sent within a given time
	// span" (core_errors).
	reasonRateLimit = "rateLimitExceeded"
	// 403: "a per-user rate limit has been reached" (core_errors).
	reasonUserRateLimit = "userRateLimitExceeded"
	// 403, Live Streaming API: "The user has sent too many requests in a
	// given timeframe" (live/docs/errors).
	reasonLiveRateLimit = "userRequestsExceedRateLimit"
	// 429 RESOURCE_EXHAUSTED, in the newer "details" list.
	reasonRateLimitDetail = "RATE_LIMIT_EXCEEDED"
	// 400: the channel has uploaded as many videos as it may in 24 hours,
	// "try again in 24 hours" (YouTube's announcement of the limit, as
	// quoted in GNOME Shotwell issue 5019). Not the project's quota: see
	// Transport.
	reasonUploadLimit = "uploadLimitExceeded"
)

// apiError is the JSON error body of Google APIs.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Errors  []struct {
			Domain string `json:"domain"`
			Reason string `json:"reason"`
		} `json:"errors"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

// reasons returns the reasons a YouTube error body gives, e.g.
// ["quotaExceeded"], from both the classic "errors" list and the newer
// "details" list. A body that is not such JSON has none.
func reasons(body []byte) []string {
	var e apiError
	if json.Unmarshal(body, &e) != nil {
		return nil
	}
	var out []string
	for _, x := range e.Error.Errors {
		if x.Reason != "" {
			out = append(out, x.Reason)
		}
	}
	for _, x := range e.Error.Details {
		if x.Reason != "" {
			out = append(out, x.Reason)
		}
	}
	return out
}

// Upstream returns a tollgate.UpstreamFunc for YouTube, given when a spent
// quota comes back:
//
//   - 403 quotaExceeded, or the older dailyLimitExceeded: the endpoint's
//     buckets (the pool for an endpoint that charges none) are spent until
//     reset(now);
//   - 403 rateLimitExceeded, userRateLimitExceeded or the Live Streaming
//     API's userRequestsExceedRateLimit, or any 429: the project pauses for
//     the Retry-After, or DefaultRatePause;
//   - anything else is an ordinary response: other 403s, such as forbidden
//     and insufficientPermissions, error bodies that are not JSON, and the
//     400 uploadLimitExceeded, which is the channel's limit rather than the
//     project's (NewTransport's Transport pauses the uploads of the
//     credential that met it).
//
// Only 403 and 429 bodies are read, and they are left whole for the caller.
func Upstream(reset func(now time.Time) time.Time) tollgate.UpstreamFunc {
	return func(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
			return tollgate.Verdict{}
		}
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		now := time.Now()
		ratePause := func(reason string) tollgate.Verdict {
			d, ok := header.RetryAfter(resp.Header.Get("Retry-After"), now)
			if !ok {
				d = DefaultRatePause
			}
			// A date already past still means "not this instant".
			return tollgate.Verdict{Spent: true, Pause: max(d, time.Second), Reason: reason}
		}
		for _, r := range reasons(body) {
			switch r {
			case reasonQuotaExceeded, reasonDailyLimit:
				buckets := make([]string, 0, len(e.Charges))
				for _, c := range e.Charges {
					buckets = append(buckets, c.Bucket)
				}
				if len(buckets) == 0 {
					buckets = append(buckets, Pool) // a free request: not the whole scope
				}
				return tollgate.Verdict{Spent: true, Buckets: buckets, Pause: max(reset(now).Sub(now), time.Second), Reason: r}
			case reasonRateLimit, reasonUserRateLimit, reasonLiveRateLimit, reasonRateLimitDetail:
				return ratePause(r)
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			return ratePause("")
		}
		return tollgate.Verdict{}
	}
}
