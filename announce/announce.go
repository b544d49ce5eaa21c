// Package announce reads the quotas an HTTP response announces in its
// headers, so that a client can hold its own count to what the server says.
//
// Read understands six dialects, each named in Quota.Dialect and read as
// its documentation defines it:
//
//   - "ratelimit": the RateLimit and RateLimit-Policy fields of the IETF
//     draft "RateLimit header fields for HTTP", revisions -09 to -11, which
//     are Structured Field Lists (RFC 9651, https://www.rfc-editor.org/rfc/rfc9651):
//     https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt
//     and https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/
//   - "ratelimit-trio": RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset of the same draft's revisions -00 to -06:
//     https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06
//     (and -01 for a RateLimit-Limit that carries its policies)
//   - "github": GitHub's X-RateLimit-Limit, -Remaining, -Used, -Reset and
//     -Resource:
//     https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
//   - "x": X's (formerly Twitter's) x-rate-limit-limit, -remaining and
//     -reset: https://docs.x.com/fundamentals/rate-limits
//   - "openai": OpenAI's x-ratelimit-limit-requests, -remaining-requests,
//     -reset-requests and the same for tokens and project tokens:
//     https://developers.openai.com/api/docs/guides/rate-limits
//   - "anthropic": Anthropic's anthropic-ratelimit-requests-limit,
//     -remaining and -reset, and the same for input-tokens, output-tokens
//     and tokens: https://docs.anthropic.com/en/api/rate-limits
//
// Retry-After (RFC 9110, section 10.2.3,
// https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3) is read by
// RetryAfter, and Read lets it delay the reset of every exhausted quota.
//
// Both functions take the instant to read at, so that relative resets
// become instants and tests need no clock. Neither trusts its input:
// malformed fields are ignored as if absent, and the work and memory spent
// on a response are bounded whatever its headers hold.
package announce

import (
	"net/http"
	"time"
)

// Quota is one quota a response announces.
type Quota struct {
	// Dialect names the header family the quota was read from: "ratelimit",
	// "ratelimit-trio", "github", "x", "openai" or "anthropic" (see the package
	// documentation). Within a dialect, no two quotas Read returns share a
	// name; across dialects they may.
	Dialect string
	// Name ties the quota to a bucket, e.g. "burst" (the IETF draft's policy
	// name), "core" or "search" (GitHub's X-RateLimit-Resource, "core" when
	// absent), "requests", "tokens" or "project-tokens" (OpenAI). The
	// dialects that announce a single unnamed quota, "ratelimit-trio" and
	// "x", name it "default", the name the IETF draft's examples give a lone
	// policy.
	Name string
	// Limit is the quota, in Unit, e.g. 5000; -1 when not announced.
	Limit int64
	// Remaining is what is left of it, e.g. 4966; -1 when not announced.
	Remaining int64
	// Used is what has been spent of it, e.g. 34; -1 when not announced
	// (only GitHub announces it, in X-RateLimit-Used).
	Used int64
	// Reset is the instant up to which Remaining is all that may be spent,
	// e.g. now+30s; the zero Time when not announced. It is never before the
	// instant Read was given, nor more than a year after it. GitHub and X
	// restore the quota then; the IETF draft's -11 calls its t parameter the
	// "effective window" and no longer promises a refill at its end.
	Reset time.Time
	// Window is the policy's window when the response states one, e.g. 60s
	// for the IETF draft's w=60; 0 otherwise (no dialect other than the IETF
	// drafts states one, and none is guessed).
	Window time.Duration
	// Unit is what Limit counts: "requests" unless announced otherwise,
	// e.g. "tokens" (OpenAI), "points" (GitHub's graphql resource) or
	// "content-bytes" (the IETF draft's qu parameter).
	Unit string
	// Partition is the IETF draft's partition key (the pk parameter), as
	// the bytes it decodes to, e.g. "App-999" for pk=:QXBwLTk5OQ==:; ""
	// when not given. It is opaque: compare it, never parse it.
	Partition string
}

// Bounds on the work done for one response.
const (
	// maxQuotas caps the quotas Read returns, and the members of a field
	// it looks at; later ones are dropped.
	maxQuotas = 32
	// maxField caps the length of a field's value, all its lines joined: a
	// longer field is ignored. Real ones are well under 200 bytes.
	maxField = 8 << 10
	// maxCount is the largest count accepted, 2^53: JSON and Lua numbers
	// hold every integer up to it exactly.
	maxCount = 1 << 53
	// maxAhead is the furthest ahead a reset, a window or a Retry-After is
	// taken at its word: longer is a broken or hostile header.
	maxAhead = 365 * 24 * time.Hour
	// maxSeconds is maxAhead in seconds.
	maxSeconds = int64(maxAhead / time.Second)
)

// Read returns the quotas h announces, read at instant now, which turns
// relative resets into instants. It returns nil when h announces none. h
// is looked up as net/http fills it, by canonical names (see
// http.CanonicalHeaderKey).
//
// Read does not judge whether a response is fresh: the IETF draft says its
// fields "SHOULD be ignored on responses that come from cache" (-10 and
// -11, section 7.3), and a caller that may see cached responses (with an
// Age field, say) should not pass them.
//
// The order is stable: the dialects in the order of the package
// documentation; within "ratelimit", RateLimit-Policy's members in field
// order, then RateLimit's members that no policy names; within "openai",
// requests, tokens, project-tokens, tokens_usage_based. A response may speak
// several dialects: each gives its own quotas, and quotas of different
// dialects are never merged, even when their names match. At most 32
// quotas are returned.
//
// When a field appears on several lines, the IETF fields are joined as RFC
// 9651 says; for the other fields every line and every comma-separated
// value must say the same, or the field is ignored. A field that is
// malformed or longer than 8 KiB is ignored, and so is a count above 2^53
// or a reset, window or Retry-After more than a year ahead.
//
// A usable Retry-After takes precedence over the announced resets, as the
// IETF draft requires (-10 and -11, section 7: "the Retry-After field MUST
// take precedence"): no quota with nothing remaining is reset before it. A
// later announced reset is kept, so that Read only ever makes its caller
// more careful: GitHub, for one, documents a secondary limit's retry-after
// and the primary limit's x-ratelimit-reset as two separate waits
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit),
// and the first must not cut the second short. Quotas with units
// remaining are left as announced.
func Read(h http.Header, now time.Time) []Quota {
	var c collector
	readRateLimit(h, now, &c)
	readTrio(h, now, &c)
	readGitHub(h, now, &c)
	readX(h, now, &c)
	readOpenAI(h, now, &c)
	readAnthropic(h, now, &c)
	if c.n == 0 {
		return nil
	}
	if d, ok := retryAfterField(h, now); ok {
		at := now.Add(d)
		for i := range c.n {
			if q := &c.q[i]; q.Remaining == 0 && (q.Reset.IsZero() || q.Reset.Before(at)) {
				q.Reset = at
			}
		}
	}
	return append([]Quota(nil), c.q[:c.n]...)
}

// collector gathers quotas without allocating, up to maxQuotas.
type collector struct {
	n int
	q [maxQuotas]Quota
}

// add appends q, reporting false when the collector is full.
func (c *collector) add(q Quota) bool {
	if c.n == maxQuotas {
		return false
	}
	c.q[c.n] = q
	c.n++
	return true
}

// seconds returns n seconds as a duration, reporting false for a negative
// n or one more than a year.
func seconds(n int64) (time.Duration, bool) {
	if n < 0 || n > maxSeconds {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// fieldLength returns the length of a field's lines joined with ", ",
// stopping early once it is over maxField.
func fieldLength(lines []string) int {
	n := 0
	for i, l := range lines {
		if i > 0 {
			n += 2
		}
		n += len(l)
		if n > maxField {
			break
		}
	}
	return n
}
