// Package github meters calls to GitHub's REST and GraphQL APIs with
// tollgate.
//
// Begin with [NewTransport](rdb, nil): an http.RoundTripper for go-github's
// http.Client or any other; a nil rdb runs an in-process Redis, for a
// single process, and nil options GitHub's documented limits. The
// package's Example runs it against a local server. The other providers
// are providers/youtube, providers/openai, providers/gemini and
// providers/anthropic; for any other upstream, tollgate.New takes a cost
// table and limits of your own.
//
// It counts as GitHub documents its limits:
//
//   - Primary limits, per credential and resource
//     (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
//     core, 5,000 requests an hour (60 for unauthenticated requests, which
//     share one scope); search, 30 a minute (10 unauthenticated); code
//     search, 10 a minute (https://docs.github.com/en/rest/search/search#rate-limit);
//     graphql, 5,000 points an hour
//     (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
//     Every response announces its resource's limit, what is left and
//     when the window resets (X-RateLimit-*), and each bucket follows
//     those announcements: it learns limits other than these defaults
//     (15,000 for Enterprise Cloud apps, 1,000 for GITHUB_TOKEN), counts
//     what other programs spent with the same credential, and ends the
//     hour where GitHub says it ends.
//   - Secondary limits, which GitHub announces only once they are hit,
//     enforced from the start: 100 requests in flight per credential
//     across REST and GraphQL; 900 points a minute for REST (GET, HEAD and
//     OPTIONS 1 point, other methods 5) and 2,000 for GraphQL (a query 1
//     point, a mutation 5); 80 content-creating requests a minute and 500
//     an hour.
//   - A conditional request (If-None-Match, If-Modified-Since) answered
//     304 Not Modified is settled to nothing in its resource when it
//     carries a credential, as GitHub counts it
//     (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate):
//     a program that polls with ETags (go-github with an HTTP cache below
//     it) keeps its hour. Its secondary points still count.
//   - A GraphQL query's point cost is estimated before it is sent, with
//     GitHub's formula, and settled from the rateLimit { cost } the query
//     may ask for.
//   - Refusals ([Upstream]): a primary limit reached pauses its resource
//     until the reset, a secondary limit pauses the credential for
//     Retry-After or at least a minute, longer on repeats, for every
//     process sharing the Redis.
//
// [NewTransport] gives a ready http.RoundTripper, for go-github or any
// other client. The cost table ([Table]) is data: override a price, add a
// bucket.
package github

import "time"

// Bucket names. The primary ones are named as GitHub names its
// resources in X-RateLimit-Resource.
const (
	// Core is the core resource: every REST request but searches and
	// GET /rate_limit, 5,000 an hour.
	Core = "core"
	// Search is the search resource: searches other than code, 30 a minute.
	Search = "search"
	// CodeSearch is the code_search resource: GET /search/code, 10 a minute.
	CodeSearch = "code_search"
	// GraphQL is the graphql resource: 5,000 points an hour.
	GraphQL = "graphql"
	// RESTPoints is the secondary limit of 900 points a minute for REST.
	RESTPoints = "rest_points"
	// GraphQLPoints is the secondary limit of 2,000 points a minute for
	// GraphQL.
	GraphQLPoints = "graphql_points"
	// Content is the secondary limit of content-creating requests: 80 a
	// minute and 500 an hour.
	Content = "content"
	// Concurrent caps the requests in flight at 100 (Bucket.MaxInFlight); it
	// is charged one unit per request, under a limit never reached.
	Concurrent = "concurrent"
)

// AnonymousScope is the scope of requests that carry no Authorization
// header: GitHub counts them by IP address, 60 an hour.
const AnonymousScope = "anonymous"

// The defaults, as GitHub documents them.
const (
	defaultCore            = 5000 // requests an hour (REST page, authenticated users)
	defaultAnonymousCore   = 60   // requests an hour (REST page, unauthenticated)
	defaultSearch          = 30   // a minute (search page, authenticated)
	defaultAnonymousSearch = 10   // a minute (search page, unauthenticated)
	defaultCodeSearch      = 10   // a minute (search page: "limits you to 10 requests per minute")
	defaultGraphQL         = 5000 // points an hour (GraphQL page, users)
	defaultRESTPoints      = 900  // points a minute (secondary limits)
	defaultGraphQLPoints   = 2000 // points a minute (secondary limits)
	defaultContentMinute   = 80   // content-generating requests a minute (secondary limits)
	defaultContentHour     = 500  // content-generating requests an hour (secondary limits)
	defaultInFlight        = 100  // concurrent requests, REST and GraphQL together (secondary limits)
	defaultReservePercent  = 5    // kept below every limit but the cap on requests in flight
)

// minute and hour are the lengths of GitHub's minute and hour, or the
// shorter ones of a test.
func minuteOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return time.Minute
}

func hourOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return time.Hour
}
