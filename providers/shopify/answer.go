package shopify

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/announce"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/told"
)

// Reading Shopify's answers.
//
// GraphQL (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits):
// every answer tells the query's cost in extensions.cost: requestedQueryCost,
// actualQueryCost, and throttleStatus {maximumAvailable,
// currentlyAvailable, restoreRate}, the bucket of the app on the store,
// whose size and restore rate depend on the store's plan and have changed
// over the years: they are read, never assumed beyond the smallest
// documented one (1,000 points restored at 50 a second) before the first
// answer. A query the bucket cannot hold is answered HTTP 200 with
// errors[].extensions.code "THROTTLED" and costs nothing; every worker then
// holds off until the points it asked for have restored, and the caller
// gets a *tollgate.QuotaError.
//
// REST (https://shopify.dev/docs/api/usage/limits): every answer tells
// the app's bucket of requests on the store in
// X-Shopify-Shop-Api-Call-Limit, "used/size" (e.g. "32/40"); a request
// that finds it full is answered 429 with a Retry-After in seconds, which
// may be decimal ("2.0"). Its leak rate is not told: a documented bucket
// leaks its size every 20 seconds (40 requests leaking 2 a second; 400 at
// 20), and so does tollgate's.
//
// Both buckets are token buckets in tollgate that refill their capacity
// every 20 seconds (period): every bucket Shopify has documented restores
// its size in 20 seconds (1,000 points at 50, 2,000 at 100, 10,000 at 500,
// 20,000 at 1,000; 40 requests at 2, 400 at 20). Until an answer tells a
// scope's bucket, its size is the smallest documented (or Options.Points
// and Options.Requests); then the size told: maximumAvailable, or 20
// seconds of restoreRate when that is less, so that tollgate never admits
// more than Shopify restores; the size in X-Shopify-Shop-Api-Call-Limit.
// Each process learns from its own answers. And what an answer tells of
// the bucket's level holds tollgate's count, as the quotas other upstreams
// announce in headers do (Bucket.Follows): the reader tells it to the
// Transport (internal/told), which records, for every worker, what Shopify
// counts as spent beyond tollgate's count (an app sharing the token without
// tollgate spent it), restored as Shopify's bucket restores; one round
// trip, only when Shopify leaves less room than tollgate counted.

// period is how long a Shopify bucket takes to restore its size.
const period = 20 * time.Second

// dialect names the quotas Shopify's answers tell (announce.Quota's
// Dialect), which the Transport's buckets follow as "shopify/points" and
// "shopify/requests".
const dialect = "shopify"

// maxAnswer bounds the part of a GraphQL answer read for its cost: an
// answer longer than this is not reconciled (its cost still settles, as
// the caller reads it).
const maxAnswer = 1 << 20

// Bounds on the pauses Shopify's answers set.
const (
	minPause     = 100 * time.Millisecond
	defaultPause = 2 * time.Second // a 429 without a usable Retry-After: one request leaks in 0.5s, twenty in 10s
	maxPause     = time.Hour
)

// answer is what a request's answer told, carried from RoundTrip through
// the reader to the verdict in the request's context.
type answer struct {
	estimate  int64 // the points charged for a GraphQL request
	throttled bool  // the answer was THROTTLED
	requested float64
	available float64
	rate      float64 // restoreRate, points a second
	// size and used are what the answer told of its bucket (Points for a
	// GraphQL answer, Requests for a REST one); size is 0 when it told
	// nothing. learned is the size tollgate is to enforce: size, or less
	// when the bucket restores slower than its size every period.
	size, used, learned int64
}

// answerKey carries a request's *answer in its context.
type answerKey struct{}

// answerOf returns the answer of a request, or nil.
func answerOf(req *http.Request) *answer {
	if req == nil {
		return nil
	}
	a, _ := req.Context().Value(answerKey{}).(*answer)
	return a
}

// withAnswer returns ctx carrying a.
func withAnswer(ctx context.Context, a *answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

// cost is the part of a GraphQL answer the reader reads.
type cost struct {
	Errors []struct {
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost *struct {
			RequestedQueryCost *float64 `json:"requestedQueryCost"`
			ThrottleStatus     *struct {
				MaximumAvailable   float64 `json:"maximumAvailable"`
				CurrentlyAvailable float64 `json:"currentlyAvailable"`
				RestoreRate        float64 `json:"restoreRate"`
			} `json:"throttleStatus"`
		} `json:"cost"`
	} `json:"extensions"`
}

// reader reads Shopify's answers below tollgate's Transport, before
// tollgate reads them: it tells tollgate's announced quotas what they say
// of the buckets.
type reader struct {
	base http.RoundTripper
}

// RoundTrip sends req through base and reads its answer.
func (r reader) RoundTrip(req *http.Request) (*http.Response, error) {
	base := r.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.Request == nil {
		resp.Request = req
	}
	a := answerOf(req)
	if a == nil {
		return resp, nil
	}
	if isGraphQL(req) {
		if resp.StatusCode == http.StatusOK {
			head, _ := tollgate.PeekBody(resp, maxAnswer+1)
			if len(head) <= maxAnswer {
				a.read(head)
			}
		}
		a.tell(req.Context(), Points)
		return resp, nil
	}
	if used, size, ok := callLimit(resp.Header.Get("X-Shopify-Shop-Api-Call-Limit")); ok {
		a.size, a.used, a.learned = size, used, size
	}
	a.tell(req.Context(), Requests)
	return resp, nil
}

// tell tells the Transport what the answer said of its bucket (named
// bucket), when it said anything, as an announced quota in tollgate's
// terms: the bucket as tollgate enforces it (learned units, restored every
// period), of which Shopify leaves what it has available, the rest used
// and all of it restored by the reset. Its size is not told as a limit:
// the Transport of the scope's plan enforces it already (t.learn), and a
// limit learned anew would decide every waiting request again. A bucket
// with less than a unit left is told without what remains: an
// announcement of none left pauses the bucket until its reset, where a
// leaky bucket restores continuously (a THROTTLED answer pauses the points
// for what the query needs).
func (a *answer) tell(ctx context.Context, bucket string) {
	if a.size <= 0 || a.learned <= 0 {
		return
	}
	remaining := min(a.size-a.used, a.learned)
	used := a.learned - remaining
	q := announce.Quota{Dialect: dialect, Name: bucket, Limit: -1, Remaining: remaining, Used: used,
		Reset: time.Now().Add(time.Duration(float64(period) * float64(used) / float64(a.learned))), Unit: bucket}
	if remaining < 1 {
		q.Remaining = -1
	}
	told.Tell(ctx, q)
}

// CloseIdleConnections closes the idle connections of base, when it can.
func (r reader) CloseIdleConnections() {
	base := r.base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// read reads a GraphQL answer's body for its cost and the bucket.
func (a *answer) read(body []byte) {
	var c cost
	if json.Unmarshal(body, &c) != nil || c.Extensions.Cost == nil {
		return
	}
	for _, e := range c.Errors {
		if e.Extensions.Code == "THROTTLED" {
			a.throttled = true
		}
	}
	if q := c.Extensions.Cost.RequestedQueryCost; q != nil && finite(*q) {
		a.requested = *q
	}
	s := c.Extensions.Cost.ThrottleStatus
	if s == nil || !finite(s.MaximumAvailable) || !finite(s.CurrentlyAvailable) || !finite(s.RestoreRate) ||
		s.MaximumAvailable < 1 || s.RestoreRate <= 0 || s.CurrentlyAvailable < 0 {
		return
	}
	a.available, a.rate = s.CurrentlyAvailable, s.RestoreRate
	a.size = int64(min(s.MaximumAvailable, 1<<40))
	a.used = a.size - int64(min(s.CurrentlyAvailable, float64(a.size)))
	a.learned = max(min(a.size, int64(min(s.RestoreRate*period.Seconds(), 1<<40))), 1)
}

// finite reports whether f is a number other than an infinity.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// callLimit reads X-Shopify-Shop-Api-Call-Limit, "used/size".
func callLimit(v string) (used, size int64, ok bool) {
	u, s, found := strings.Cut(strings.TrimSpace(v), "/")
	if !found {
		return 0, 0, false
	}
	used, err1 := strconv.ParseInt(u, 10, 64)
	size, err2 := strconv.ParseInt(s, 10, 64)
	if err1 != nil || err2 != nil || size < 1 || size > 1<<30 || used < 0 {
		return 0, 0, false
	}
	return min(used, size), size, true
}

// retryAfter reads a Retry-After of seconds, which Shopify may send
// decimal ("2.0"); defaultPause when it is not one.
func retryAfter(v string) time.Duration {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !finite(f) || f < 0 || f > maxPause.Seconds() {
		return defaultPause
	}
	return max(time.Duration(f*float64(time.Second)), minPause)
}

// upstream is the Transport's tollgate.UpstreamFunc: a 429 pauses the
// bucket of the request's endpoint for its Retry-After; a THROTTLED
// answer pauses the points until the points the query asked for have
// restored.
func upstream(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
	bucket := Requests
	if e.Name == endpointGraphQL {
		bucket = Points
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return tollgate.Verdict{Spent: true, Buckets: []string{bucket}, Pause: retryAfter(resp.Header.Get("Retry-After"))}
	}
	a := answerOf(resp.Request)
	if a == nil || !a.throttled {
		return tollgate.Verdict{}
	}
	pause := defaultPause
	if a.rate > 0 {
		need := max(a.requested, float64(a.estimate)) - a.available
		pause = min(max(time.Duration(need/a.rate*float64(time.Second)), minPause), maxPause)
	}
	return tollgate.Verdict{Spent: true, Buckets: []string{Points}, Pause: pause, Reason: "THROTTLED"}
}
