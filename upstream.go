package tollgate

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// defaultPause is how long a scope pauses after a 429 that carries no
// usable Retry-After.
const defaultPause = 10 * time.Second

// A Verdict is what an upstream response says about the quota.
type Verdict struct {
	// Spent reports that the upstream refused the call for want of quota.
	Spent bool
	// Buckets are the buckets it says are spent; none means the whole scope.
	Buckets []string
	// Pause is how long every worker must hold off, e.g. until the next
	// Pacific midnight for YouTube's quotaExceeded.
	Pause time.Duration
	// Reason is the upstream's own name for the refusal, e.g.
	// "quotaExceeded", for Trace.Paused and metrics: one of the few words the
	// reader knows, never free text from the response. Empty means the
	// status code, e.g. "429".
	Reason string
}

// An UpstreamFunc reads a response for what it says about the quota: a
// provider's own signals (YouTube's 403 quotaExceeded), or any your
// upstream sends. It may read the body, but must leave it for the caller to
// read whole again: PeekBody does both. It is called on every response; it
// must be safe for concurrent use and must not fail: a body it cannot
// parse is simply not a quota verdict. Wrap DefaultUpstream to keep its
// reading of 429s.
type UpstreamFunc func(resp *http.Response, endpoint costs.Endpoint) Verdict

// DefaultUpstream reads any 429 Too Many Requests as the whole scope being
// spent, for as long as its Retry-After says (10s when it says nothing
// usable). Providers wrap it with their own signals.
func DefaultUpstream(resp *http.Response, _ costs.Endpoint) Verdict {
	if resp.StatusCode != http.StatusTooManyRequests {
		return Verdict{}
	}
	// The wall clock: an HTTP date in Retry-After is the upstream's.
	d, ok := header.RetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if !ok {
		d = defaultPause
	}
	// A date already past still means "not this instant".
	return Verdict{Spent: true, Pause: max(d, time.Second)}
}

// PeekBody reads up to n bytes of a response body and puts them back in
// front of the rest, so the caller still reads the body whole. An
// UpstreamFunc that reads the body calls it.
func PeekBody(resp *http.Response, n int64) ([]byte, error) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, n))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return head, err
}
