package github

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/announce"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// How GitHub says no, and how long to hold off, from
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit
// (REST), https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#exceeding-the-rate-limit
// (GraphQL) and
// https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately:
//
//   - "If you exceed your primary rate limit, you will receive a 403 or 429
//     response, and the x-ratelimit-remaining header will be 0. You should
//     not retry your request until after the time specified by the
//     x-ratelimit-reset header." GraphQL answers a primary limit with a
//     200 "but you will receive an error message"; the message's type is
//     RATE_LIMITED (what octokit's throttling plugin reads), and RATE_LIMIT
//     with code graphql_rate_limit has been seen too (githubkit issue 271).
//   - "If you exceed a secondary rate limit, you will receive a 403 or 429
//     response and an error message that indicates that you exceeded a
//     secondary rate limit" (GraphQL: "200 or 403"). The wait: "If the
//     retry-after response header is present, you should not retry your
//     request until after that many seconds has elapsed. If the
//     x-ratelimit-remaining header is 0, [...] until after the time [...]
//     specified by the x-ratelimit-reset header. Otherwise, wait for at
//     least one minute before retrying. If your request continues to fail
//     due to a secondary rate limit, wait for an exponentially increasing
//     amount of time between retries".
//
// The message is read, not matched whole: GitHub's wording varies ("You
// have exceeded a secondary rate limit and have been temporarily blocked
// from content creation", "... Please wait a few minutes before you try
// again."), and its documentation_url ends in "secondary-rate-limits"
// (go-github v75 reads only that, and only on a 403) or, in older
// answers, "#abuse-rate-limits". A rate-limit message on a 403 or 429 with
// units left ("API rate limit exceeded" has been seen there) is read as a
// secondary limit too, and so is any other 429: GitHub sends 429 for rate
// limits only. Any other 403 (no permission, a blocked token) is not
// quota.

// maxErrorBody bounds how much of a refusal is read: GitHub's are a few
// hundred bytes.
const maxErrorBody = 16 << 10

// maxGraphQLError bounds how much of a GraphQL answer (status 200) is read
// for a rate-limit error: those are short, and an answer longer than this
// carries data, not a refusal.
const maxGraphQLError = 4 << 10

// streakBound bounds the credentials whose secondary limits are
// remembered; past it, the memory starts afresh.
const streakBound = 4096

// Upstream returns a tollgate.UpstreamFunc that reads GitHub's refusals,
// given the length of GitHub's minute (0 for a real one; shorter against a
// simulator):
//
//   - a 403 or 429 with X-RateLimit-Remaining: 0, or a GraphQL answer
//     (status 200) whose errors have the type RATE_LIMITED: the resource
//     named by X-RateLimit-Resource (core, or graphql for a GraphQL
//     request, when absent) is spent until X-RateLimit-Reset, or a later
//     Retry-After; for every endpoint that charges that bucket;
//   - a 403 or 429 whose message says a secondary rate limit was exceeded,
//     any other 429, or a GraphQL answer with such a message: the whole
//     credential pauses for its Retry-After, else until X-RateLimit-Reset
//     when X-RateLimit-Remaining is 0, else a minute; when a credential
//     meets secondary limits again within an hour of the last, the pause
//     is at least 2, 4, 8... minutes, at most an hour;
//   - anything else, other 403s included, is an ordinary response.
//
// Bodies are read only for 403s, 429s and GraphQL answers (up to 4 KiB of
// those), and left whole for the caller.
func Upstream(minute time.Duration) tollgate.UpstreamFunc {
	r := &refusals{minute: minuteOr(minute), now: time.Now, streaks: map[string]streak{}}
	return r.read
}

// refusals reads GitHub's refusals, and remembers each credential's
// streak of secondary limits.
type refusals struct {
	minute  time.Duration
	now     func() time.Time // tests move it by hand
	mu      sync.Mutex
	streaks map[string]streak
}

// streak is a credential's secondary limits met in a row.
type streak struct {
	n     int       // how many, each within an hour after the last pause
	until time.Time // when the last pause ends
}

// errorBody is what GitHub's refusals say: a REST error, or a GraphQL
// answer's errors.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Errors           []struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (r *refusals) read(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
	graphQL := chargesBucket(e, GraphQL)
	var body errorBody
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests:
		raw, _ := tollgate.PeekBody(resp, maxErrorBody)
		json.Unmarshal(raw, &body) // what is not such JSON says nothing
	case resp.StatusCode == http.StatusOK && graphQL:
		raw, _ := tollgate.PeekBody(resp, maxGraphQLError+1)
		if len(raw) > maxGraphQLError || json.Unmarshal(raw, &body) != nil {
			return tollgate.Verdict{}
		}
	default:
		return tollgate.Verdict{}
	}
	now := r.now()
	switch {
	case body.saysSecondary():
		return tollgate.Verdict{Spent: true, Pause: r.secondaryPause(resp, now)}
	case resp.StatusCode != http.StatusOK && strings.TrimSpace(resp.Header.Get("X-RateLimit-Remaining")) == "0" || body.graphQLRateLimited():
		resource, reset := spentResource(resp.Header, graphQL, now)
		return tollgate.Verdict{Spent: true, Buckets: []string{resource}, Pause: max(reset.Sub(now), time.Second)}
	case body.saysRateLimit() || resp.StatusCode == http.StatusTooManyRequests:
		return tollgate.Verdict{Spent: true, Pause: r.secondaryPause(resp, now)}
	}
	return tollgate.Verdict{}
}

// saysSecondary reports whether the body tells of a secondary rate limit,
// or of an "abuse" one as older answers called it.
func (b errorBody) saysSecondary() bool {
	says := func(msg string) bool {
		m := strings.ToLower(msg)
		return strings.Contains(m, "secondary rate limit") || strings.Contains(m, "abuse detection")
	}
	if says(b.Message) || strings.HasSuffix(b.DocumentationURL, "secondary-rate-limits") || strings.HasSuffix(b.DocumentationURL, "#abuse-rate-limits") {
		return true
	}
	for _, x := range b.Errors {
		if says(x.Message) {
			return true
		}
	}
	return false
}

// graphQLRateLimited reports whether a GraphQL answer's errors tell of
// its primary limit.
func (b errorBody) graphQLRateLimited() bool {
	for _, x := range b.Errors {
		if x.Type == "RATE_LIMITED" || x.Type == "RATE_LIMIT" || x.Code == "graphql_rate_limit" {
			return true
		}
	}
	return false
}

// saysRateLimit reports whether the body tells of a rate limit without
// saying which.
func (b errorBody) saysRateLimit() bool {
	if strings.Contains(strings.ToLower(b.Message), "rate limit") {
		return true
	}
	for _, x := range b.Errors {
		if strings.Contains(strings.ToLower(x.Message), "rate limit") {
			return true
		}
	}
	return false
}

// spentResource returns the resource a primary refusal is for and when it
// resets: X-RateLimit-Resource (core when absent, graphql for a GraphQL
// request) and X-RateLimit-Reset, or a later Retry-After; a minute from
// now when neither can be read.
func spentResource(h http.Header, graphQL bool, now time.Time) (string, time.Time) {
	resource, reset := Core, time.Time{}
	if graphQL {
		resource = GraphQL
	}
	for _, q := range announce.Read(h, now) {
		if q.Dialect == "github" {
			resource, reset = q.Name, q.Reset
			if graphQL && h.Get("X-RateLimit-Resource") == "" {
				resource = GraphQL
			}
			break
		}
	}
	if d, ok := header.RetryAfter(h.Get("Retry-After"), now); ok && now.Add(d).After(reset) {
		reset = now.Add(d)
	}
	if reset.IsZero() {
		reset = now.Add(time.Minute)
	}
	return resource, reset
}

// secondaryPause is how long a credential holds off after a secondary
// limit: Retry-After, else until the reset when nothing is left, else a
// minute; when it met one within an hour after the last pause ended, at
// least a minute doubled for each in the streak, at most an hour. A
// refusal that answers a request sent before the last pause began (many
// in flight meet the limit together) continues that pause rather than
// lengthening the streak.
func (r *refusals) secondaryPause(resp *http.Response, now time.Time) time.Duration {
	d, ok := header.RetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok && strings.TrimSpace(resp.Header.Get("X-RateLimit-Remaining")) == "0" {
		for _, q := range announce.Read(resp.Header, now) {
			if q.Dialect == "github" && !q.Reset.IsZero() {
				d, ok = q.Reset.Sub(now), true
				break
			}
		}
	}
	if !ok {
		d = r.minute
	}
	d = min(max(d, time.Second), 365*24*time.Hour)
	return r.met(scopeOfResponse(resp), now, d)
}

// met records a secondary limit the credential of scope met now, and
// returns the pause it calls for, given the pause d the answer asks.
func (r *refusals) met(scope string, now time.Time, d time.Duration) time.Duration {
	hour := 60 * r.minute
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.streaks[scope]
	if now.Before(s.until) { // the same limit, met by a request already in flight
		d = max(d, s.until.Sub(now))
		s.until = now.Add(d)
		r.streaks[scope] = s
		return d
	}
	if s.n > 0 && now.Sub(s.until) <= hour {
		s.n++
	} else {
		s.n = 1
	}
	if s.n > 1 {
		d = max(d, min(r.minute<<min(s.n-1, 6), hour)) // 2, 4, ... 60 minutes
	}
	s.until = now.Add(d)
	if len(r.streaks) >= streakBound {
		clear(r.streaks)
	}
	r.streaks[scope] = s
	return d
}

// scopeOfResponse names the credential a response answered, from the
// request that was sent; "" when the response does not tell it.
func scopeOfResponse(resp *http.Response) string {
	if resp.Request == nil {
		return ""
	}
	return scopeOf(resp.Request)
}

// chargesBucket reports whether the endpoint charges bucket.
func chargesBucket(e costs.Endpoint, bucket string) bool {
	for _, c := range e.Charges {
		if c.Bucket == bucket {
			return true
		}
	}
	return false
}
