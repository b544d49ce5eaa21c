package github

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/testclock"
)

// Bodies GitHub answers with. The documented ones are from the page that
// showed them (github/docs at 015d8c38, content/rest/overview/
// resources-in-the-rest-api.md); the others were seen in answers: the
// primary "for user ID" message with the current documentation URL, the
// secondary message of gitGraber issue 41, GraphQL's RATE_LIMITED (what
// octokit's throttling plugin reads) and RATE_LIMIT (githubkit issue 271).
const (
	primaryDocumented   = `{"message": "API rate limit exceeded for xxx.xxx.xxx.xxx. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)", "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`
	primarySeen         = `{"message": "API rate limit exceeded for user ID 99822. If you reach out to GitHub Support for help, please include the request ID CF05:4DFD1:19AA6E5:33F8C4B:687A2E8E.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api", "status": "403"}`
	secondaryDocumented = `{"message": "You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later.", "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"}`
	secondarySeen       = `{"documentation_url": "https://docs.github.com/en/free-pro-team@latest/rest/overview/resources-in-the-rest-api#secondary-rate-limits", "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
	graphQLRateLimited  = `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}`
	graphQLRateLimit    = `{"errors":[{"type":"RATE_LIMIT","code":"graphql_rate_limit","message":"API rate limit already exceeded for user ID 1."}]}`
	graphQLSecondary    = `{"errors":[{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}]}`
	permission          = `{"message": "Resource not accessible by personal access token", "documentation_url": "https://docs.github.com/rest/issues/issues#create-an-issue", "status": "403"}`
	notFound            = `{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}`
)

var (
	coreRead = costs.Endpoint{Name: endpointRead, Charges: []costs.Charge{{Bucket: Core, Units: 1}, {Bucket: RESTPoints, Units: 1}, {Bucket: Concurrent, Units: 1}}}
	query    = costs.Endpoint{Name: endpointQuery, Charges: []costs.Charge{{Bucket: GraphQL, Units: 1}, {Bucket: GraphQLPoints, Units: 1}, {Bucket: Concurrent, Units: 1}}}
)

// answer is a response of status with headers ("Name: value") and body,
// to a request authorized by token ("" for none).
func answer(status int, token, body string, headers ...string) *http.Response {
	req, _ := http.NewRequest("GET", "https://api.github.com/x", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	h := http.Header{}
	for _, kv := range headers {
		k, v, _ := strings.Cut(kv, ": ")
		h.Add(k, v)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}
}

func TestUpstream(t *testing.T) {
	clock := testclock.New(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	reset := "X-RateLimit-Reset: " + strconv.FormatInt(now.Add(30*time.Minute).Unix(), 10)
	for _, c := range []struct {
		name     string
		resp     *http.Response
		endpoint costs.Endpoint
		buckets  string // the buckets spent; "scope" for the whole scope; "" for not spent
		pause    time.Duration
	}{
		{"primary 403, documented", answer(403, "", primaryDocumented, "X-RateLimit-Limit: 60", "X-RateLimit-Remaining: 0", reset), coreRead, "core", 30 * time.Minute},
		{"primary 403, seen", answer(403, "t", primarySeen, "X-RateLimit-Remaining: 0", "X-RateLimit-Resource: search", reset), coreRead, "search", 30 * time.Minute},
		{"primary 429", answer(429, "t", primarySeen, "X-RateLimit-Remaining: 0", "X-RateLimit-Resource: core", reset), coreRead, "core", 30 * time.Minute},
		{"primary with a later Retry-After", answer(403, "t", primarySeen, "X-RateLimit-Remaining: 0", reset, "Retry-After: 3600"), coreRead, "core", time.Hour},
		{"primary without a reset", answer(403, "t", primarySeen, "X-RateLimit-Remaining: 0"), coreRead, "core", time.Minute},
		{"primary, GraphQL on 200", answer(200, "t", graphQLRateLimited, "X-RateLimit-Remaining: 0", "X-RateLimit-Resource: graphql", reset), query, "graphql", 30 * time.Minute},
		{"primary, GraphQL on 200 without headers", answer(200, "t", graphQLRateLimit), query, "graphql", time.Minute},
		{"secondary, documented, no Retry-After", answer(403, "a", secondaryDocumented, "X-RateLimit-Remaining: 4000"), coreRead, "scope", time.Minute},
		{"secondary, seen, Retry-After", answer(403, "b", secondarySeen, "Retry-After: 90"), coreRead, "scope", 90 * time.Second},
		{"secondary 429, nothing left", answer(429, "c", secondarySeen, "X-RateLimit-Remaining: 0", reset), coreRead, "scope", 30 * time.Minute},
		{"a rate limit that does not say which, with units left", answer(403, "d", primarySeen, "X-RateLimit-Remaining: 12"), coreRead, "scope", time.Minute},
		{"a 429 that says nothing", answer(429, "e", "<html>slow down</html>"), coreRead, "scope", time.Minute},
		{"secondary, GraphQL on 200", answer(200, "f", graphQLSecondary), query, "scope", time.Minute},
		{"no permission", answer(403, "t", permission, "X-RateLimit-Remaining: 4999"), coreRead, "", 0},
		{"a 403 that is not JSON", answer(403, "t", "<html>forbidden</html>"), coreRead, "", 0},
		{"not found", answer(404, "t", notFound, "X-RateLimit-Remaining: 0"), coreRead, "", 0},
		{"a GraphQL answer with data", answer(200, "t", `{"data":{"viewer":{"login":"octocat"}}}`, "X-RateLimit-Remaining: 0", reset), query, "", 0},
		{"a GraphQL answer too long for an error", answer(200, "t", `{"errors":[{"type":"RATE_LIMITED"}],"data":"`+strings.Repeat("x", maxGraphQLError)+`"}`), query, "", 0},
		{"a REST 200 is not read", answer(200, "t", graphQLRateLimited), coreRead, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &refusals{minute: time.Minute, now: clock.Now, streaks: map[string]streak{}}
			want, _ := io.ReadAll(c.resp.Body)
			c.resp.Body = io.NopCloser(strings.NewReader(string(want)))
			v := r.read(c.resp, c.endpoint)
			got := ""
			if v.Spent {
				got = strings.Join(v.Buckets, ",")
				if got == "" {
					got = "scope"
				}
			}
			if got != c.buckets || v.Pause != c.pause {
				t.Errorf("verdict %q for %v; want %q for %v", got, v.Pause, c.buckets, c.pause)
			}
			if rest, _ := io.ReadAll(c.resp.Body); string(rest) != string(want) {
				t.Errorf("the body was not left whole: %q", rest)
			}
		})
	}
}

// A credential that meets secondary limits again within an hour of its
// last pause pauses longer each time: 1, 2, 4 minutes; the requests that
// were in flight when one was met continue its pause (for at least the
// minute each refusal asks) without lengthening the streak; an hour of
// quiet starts afresh.
func TestSecondaryPausesGrow(t *testing.T) {
	clock := testclock.New(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	r := &refusals{minute: time.Minute, now: clock.Now, streaks: map[string]streak{}}
	pause := func(token string) time.Duration {
		return r.read(answer(403, token, secondarySeen), coreRead).Pause
	}
	for i, step := range []struct {
		after time.Duration // since the last step
		token string
		want  time.Duration
	}{
		{0, "t", time.Minute},
		{10 * time.Second, "t", time.Minute},     // in flight during the pause
		{10 * time.Second, "other", time.Minute}, // another credential: its own streak
		{50 * time.Second, "t", 2 * time.Minute}, // the pause ended: a repeat
		{2*time.Minute + time.Second, "t", 4 * time.Minute},
		{4*time.Minute + time.Hour + time.Second, "t", time.Minute}, // an hour of quiet
	} {
		clock.Add(step.after)
		if got := pause(step.token); got != step.want {
			t.Errorf("step %d: pause %v, want %v", i, got, step.want)
		}
	}
	// The longest pause is an hour.
	for range 10 {
		clock.Add(pause("long") + time.Second)
	}
	if d := pause("long"); d != time.Hour {
		t.Errorf("the tenth repeat pauses %v, want an hour", d)
	}
}
