package tollgate

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	// ErrQuotaExhausted matches a *QuotaError: the request was not sent
	// because its quota has no room, by tollgate's count or the upstream's.
	ErrQuotaExhausted = errors.New("tollgate: quota exhausted")
	// ErrUnavailable matches an *UnavailableError: Redis could not be
	// reached and the endpoint fails closed, so nothing was sent.
	ErrUnavailable = errors.New("tollgate: quota store unavailable")
	// ErrConfig matches errors about a Config a Transport cannot work
	// with, e.g. a bucket with no limits; New returns them.
	ErrConfig = errors.New("tollgate: invalid configuration")
	// ErrClosed is returned by a Transport after Close.
	ErrClosed = errors.New("tollgate: transport closed")
)

// QuotaError reports a request that was not sent because its quota has no
// room. It matches ErrQuotaExhausted.
type QuotaError struct {
	// Endpoint is the endpoint's name in the cost table, e.g. "search.list".
	Endpoint string
	// Scope is the quota pool, e.g. "project-a", or a hash when the scope
	// comes from a credential.
	Scope string
	// Bucket is the bucket that had no room, e.g. "pool"; empty when the
	// whole scope is paused or the bucket is not known.
	Bucket string
	// Units is what the request would have spent from Bucket (from all its
	// buckets when Bucket is empty), e.g. 100.
	Units int64
	// RetryAfter is how long until the units fit, e.g. 41s; zero when not
	// known (units no local share can ever hold).
	RetryAfter time.Duration
	// Upstream reports that the upstream itself said its quota is spent
	// (e.g. YouTube's 403 quotaExceeded, or a 429): every worker sharing the
	// Redis now holds off until RetryAfter.
	Upstream bool
}

func (e *QuotaError) Error() string {
	who := "tollgate"
	if e.Upstream {
		who = "the upstream"
	}
	bucket := ""
	if e.Bucket != "" {
		bucket = fmt.Sprintf(" bucket %q", e.Bucket)
	}
	return fmt.Sprintf("tollgate: quota exhausted (by %s): endpoint %q scope %q%s units %d; retry after %v",
		who, e.Endpoint, e.Scope, bucket, e.Units, e.RetryAfter)
}

// Is reports whether target is ErrQuotaExhausted.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExhausted }

// ServeHTTP answers a request with the refusal, for a service that passes
// it on to its own callers: 429 Too Many Requests with Retry-After in
// whole seconds, rounded up (at least 1), and a one-line text body. Scope,
// endpoint and bucket stay out of it: they describe your upstream, not
// your service.
//
//	var qe *tollgate.QuotaError
//	if errors.As(err, &qe) {
//		qe.ServeHTTP(w, r)
//		return
//	}
func (e *QuotaError) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	secs := max(int64(math.Ceil(e.RetryAfter.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, "quota exhausted; retry after %d seconds\n", secs)
}

// UnavailableError reports a request not sent because Redis could not be
// reached and its endpoint fails closed. It matches ErrUnavailable and
// unwraps to the limiter's error (which matches quota.ErrRedis).
type UnavailableError struct {
	Endpoint string // e.g. "search.list"
	Scope    string // e.g. "project-a"
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("tollgate: quota store unavailable, endpoint %q fails closed: %v", e.Endpoint, e.Err)
}

// Unwrap returns the limiter's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// configError is a Transport that cannot work as configured; it matches ErrConfig.
type configError struct{ msg string }

func configErrorf(format string, args ...any) error {
	return &configError{msg: "tollgate: " + fmt.Sprintf(format, args...)}
}

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrConfig }
