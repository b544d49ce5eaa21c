package youtube

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// DefaultRatePause is how long a project pauses after a rate-limit error
// (rateLimitExceeded, userRateLimitExceeded, a 429) that says nothing of
// when to retry.
const DefaultRatePause = 10 * time.Second

// maxErrorBody bounds how much of an error response is read: YouTube's are
// well under a kilobyte.
const maxErrorBody = 16 << 10

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
//   - 403 quotaExceeded (or dailyLimitExceeded): the endpoint's buckets are
//     spent until reset(now);
//   - rateLimitExceeded, userRateLimitExceeded, or any 429: the project
//     pauses for the Retry-After, or DefaultRatePause;
//   - anything else, including error bodies that are not JSON, is an
//     ordinary response.
//
// Only 403 and 429 bodies are read, and they are left whole for the caller.
func Upstream(reset func(now time.Time) time.Time) tollgate.UpstreamFunc {
	return func(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
			return tollgate.Verdict{}
		}
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		now := time.Now()
		ratePause := func() tollgate.Verdict {
			d, ok := tollgate.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
			if !ok {
				d = DefaultRatePause
			}
			// A date already past still means "not this instant".
			return tollgate.Verdict{Spent: true, Pause: max(d, time.Second)}
		}
		for _, r := range reasons(body) {
			switch r {
			case "quotaExceeded", "dailyLimitExceeded":
				buckets := make([]string, len(e.Charges))
				for i, c := range e.Charges {
					buckets[i] = c.Bucket
				}
				return tollgate.Verdict{Spent: true, Buckets: buckets, Pause: max(reset(now).Sub(now), time.Second)}
			case "rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED":
				return ratePause()
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			return ratePause()
		}
		return tollgate.Verdict{}
	}
}
