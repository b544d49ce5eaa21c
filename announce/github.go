package announce

import (
	"net/http"
	"time"
)

// readGitHub reads GitHub's headers
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
// x-ratelimit-limit, -remaining and -used are counts; x-ratelimit-reset is
// "The time at which the current rate limit window resets, in UTC epoch
// seconds"; x-ratelimit-resource is "The rate limit resource that the
// request counted against", which names the quota. Older responses carry no
// resource header, and those were all for the core resource, so "core" is
// the default. A resource header that is present but unusable leaves the
// quota unattributable, so none is read.
//
// The GraphQL resource counts points, not requests: "For GraphQL requests,
// this will always be graphql"
// (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
func readGitHub(h http.Header, now time.Time, c *collector) {
	q := Quota{
		Dialect:   "github",
		Name:      "core",
		Limit:     count(h, "X-Ratelimit-Limit"),
		Remaining: count(h, "X-Ratelimit-Remaining"),
		Used:      count(h, "X-Ratelimit-Used"),
		Reset:     epoch(h, "X-Ratelimit-Reset", now),
		Unit:      "requests",
	}
	if q.Limit < 0 && q.Remaining < 0 {
		return
	}
	if _, present := h["X-Ratelimit-Resource"]; present {
		v, ok := plainField(h, "X-Ratelimit-Resource")
		if !ok || !resourceName(v) {
			return
		}
		q.Name = v
	}
	if q.Name == "graphql" {
		q.Unit = "points"
	}
	c.add(q)
}

// readX reads X's headers (https://docs.x.com/fundamentals/rate-limits):
// x-rate-limit-limit, "Maximum requests allowed in the current window";
// x-rate-limit-remaining; and x-rate-limit-reset, "Unix timestamp when the
// limit resets". They name no resource: the limit is the endpoint's, so
// the quota is named "default".
func readX(h http.Header, now time.Time, c *collector) {
	q := Quota{
		Dialect:   "x",
		Name:      "default",
		Limit:     count(h, "X-Rate-Limit-Limit"),
		Remaining: count(h, "X-Rate-Limit-Remaining"),
		Used:      -1,
		Reset:     epoch(h, "X-Rate-Limit-Reset", now),
		Unit:      "requests",
	}
	if q.Limit < 0 && q.Remaining < 0 {
		return
	}
	c.add(q)
}

// epoch reads a reset given in Unix epoch seconds as an instant no earlier
// than now: a reset a little in the past (a slow response, a skewed clock)
// has happened already. It returns the zero Time for a value unusable,
// more than a year ahead, or more than a year behind.
//
// A value of at most a year's seconds is no plausible instant (it falls in
// 1970): it is the count of seconds that other servers send under these
// names, one of the meanings the IETF draft lists for X-RateLimit-Reset
// ("seconds remaining to the window expiration", -10, appendix "RateLimit
// header fields currently used on the web"), and is read so. Read as an
// instant it would say the quota reset long ago, which is less careful.
func epoch(h http.Header, key string, now time.Time) time.Time {
	n := count(h, key)
	if n < 0 {
		return time.Time{}
	}
	if d, ok := seconds(n); ok {
		return now.Add(d)
	}
	d := time.Unix(n, 0).Sub(now)
	switch {
	case d > maxAhead || d < -maxAhead:
		return time.Time{}
	case d < 0:
		d = 0
	}
	return now.Add(d)
}

// resourceName reports whether v can be a GitHub rate-limit resource, such
// as "core", "search", "code_search" or "graphql": 1 to 64 letters, digits,
// "_", "-" or ".".
func resourceName(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(isAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
