package quota

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; the typed errors below match them with [errors.Is].
var (
	// ErrInvalid matches every error about an argument the limiter cannot
	// use: a bad limit, a non-positive cost, an empty scope. Nothing is
	// reserved when it is returned.
	ErrInvalid = errors.New("quota: invalid argument")
	// ErrCostExceedsLimit matches a *CostError: the cost is larger than a
	// limit and could never be admitted, so it is refused without waiting.
	ErrCostExceedsLimit = errors.New("quota: cost exceeds limit")
	// ErrRefused matches a *RefusedError: the quota has no room for the
	// cost before the caller's deadline.
	ErrRefused = errors.New("quota: refused")
	// ErrRedis matches a *RedisError: Redis could not be reached or failed,
	// so no decision was made.
	ErrRedis = errors.New("quota: redis failed")
	// ErrClosed is returned by a Limiter after Close.
	ErrClosed = errors.New("quota: limiter closed")
)

// InvalidError describes an argument the limiter cannot use. It matches ErrInvalid.
type InvalidError struct {
	// What names the argument, e.g. `limit 0/1h0m0s`.
	What string
	// Why says what is wrong with it, e.g. "units must be positive".
	Why string
}

func invalid(what, why string) error { return &InvalidError{What: what, Why: why} }

func (e *InvalidError) Error() string { return "quota: invalid " + e.What + ": " + e.Why }

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// CostError reports a cost larger than one of its limits: such a call can
// never be admitted. It matches ErrCostExceedsLimit and ErrInvalid.
type CostError struct {
	Bucket string // the charge's bucket, e.g. "search"
	Cost   int64  // the cost asked for, e.g. 1600
	Limit  Limit  // the limit it exceeds, e.g. 1000/day@America/Los_Angeles
}

func (e *CostError) Error() string {
	return fmt.Sprintf("quota: cost %d for bucket %q exceeds limit %v", e.Cost, e.Bucket, e.Limit)
}

// Is reports whether target is ErrCostExceedsLimit or ErrInvalid.
func (e *CostError) Is(target error) bool {
	return target == ErrCostExceedsLimit || target == ErrInvalid
}

// RefusedError reports that the cost does not fit before the caller's
// deadline. It matches ErrRefused.
type RefusedError struct {
	// Scope is the scope asked for, as the caller named it.
	Scope string
	// RetryAfter is how long after the decision the cost would fit, given
	// what was recorded then, e.g. 41.2s. It is zero when unknown.
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("quota: refused: no room before the deadline; retry after %v", e.RetryAfter)
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// redisError wraps a failed command. When the caller's context ended, the
// context's error is returned instead: the caller gave up, which says
// nothing about Redis.
func redisError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	// A client that honours deadlines may time out a hair before the
	// context's own timer fires.
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return &RedisError{Op: op, Err: err}
}

// RedisError wraps a failure of Redis or of the connection to it. It matches
// ErrRedis and unwraps to the client's error.
type RedisError struct {
	Op  string // what the limiter was doing, e.g. "reserve"
	Err error  // the error go-redis returned
}

func (e *RedisError) Error() string { return "quota: " + e.Op + ": redis: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *RedisError) Unwrap() error { return e.Err }

// Is reports whether target is ErrRedis.
func (e *RedisError) Is(target error) bool { return target == ErrRedis }
