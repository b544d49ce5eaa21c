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
	// Cause says why there was no room: tollgate's count (NoRoom), a
	// pause an upstream's answer set (PausedByUpstream: every worker
	// sharing the Redis holds off until RetryAfter), an operator's pause
	// (PausedByOperator), a cap on requests in flight (CapFull), or the
	// FailLocal share while Redis is down (RedisDown).
	Cause Cause
	// Reason is, for a pause, why it was set, e.g. "deploy rollback" or
	// "the upstream answered 429 to search.list"; empty otherwise, or when
	// the pause's writer said nothing.
	Reason string
}

// A Cause says why a request found no room (QuotaError.Cause).
type Cause int

// The causes of a *QuotaError.
const (
	// NoRoom: tollgate's shared count has no room for the units before
	// RetryAfter (or before MaxWait, for a request that would wait).
	NoRoom Cause = iota
	// PausedByUpstream: the upstream said its quota is spent (a 429 with
	// Retry-After, YouTube's quotaExceeded, an announced quota at zero),
	// and every worker pauses until RetryAfter.
	PausedByUpstream
	// PausedByOperator: an operator paused the scope or bucket (tollgate
	// pause, quota.Limiter.PauseBecause).
	PausedByOperator
	// CapFull: the bucket's cap on requests in flight had no slot in time.
	CapFull
	// RedisDown: Redis could not be reached, and the FailLocal share this
	// process holds meanwhile had no room.
	RedisDown
)

// String returns the cause in words, e.g. "an operator's pause".
func (c Cause) String() string {
	switch c {
	case NoRoom:
		return "no room"
	case PausedByUpstream:
		return "the upstream's pause"
	case PausedByOperator:
		return "an operator's pause"
	case CapFull:
		return "a cap on requests in flight"
	case RedisDown:
		return "Redis down, the local share spent"
	}
	return "Cause(" + strconv.Itoa(int(c)) + ")"
}

// Paused reports whether the cause is a pause, an upstream's or an
// operator's.
func (c Cause) Paused() bool { return c == PausedByUpstream || c == PausedByOperator }

func (e *QuotaError) Error() string {
	bucket := ""
	if e.Bucket != "" {
		bucket = fmt.Sprintf(" bucket %q", e.Bucket)
	}
	why := e.Cause.String()
	if e.Reason != "" {
		why += ": " + e.Reason
	}
	retry := "retry after " + readable(e.RetryAfter)
	if e.RetryAfter <= 0 {
		retry = "retry time unknown"
	}
	return fmt.Sprintf("tollgate: quota exhausted (%s): endpoint %q scope %q%s units %d; %s",
		why, e.Endpoint, e.Scope, bucket, e.Units, retry)
}

// readable rounds d to what a person reads: whole seconds from 10s up,
// tenths of a second below (e.g. 24h0m0s, 41s, 2.3s), and milliseconds
// below a tenth.
func readable(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= 100*time.Millisecond:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
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
