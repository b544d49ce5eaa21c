package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors; the typed errors below match them with [errors.Is].
var (
	// ErrInvalid matches every error about an argument the limiter cannot
	// use: a bad limit, units that are not positive, an empty scope.
	// Nothing is reserved when it is returned.
	ErrInvalid = errors.New("quota: invalid argument")
	// ErrCostExceedsLimit matches a *CostError: a charge of more units than
	// a limit holds could never be admitted, so it is refused without
	// waiting.
	ErrCostExceedsLimit = errors.New("quota: cost exceeds limit")
	// ErrRefused matches a *RefusedError: the quota has no room for the
	// cost before the caller's deadline.
	ErrRefused = errors.New("quota: refused")
	// ErrRedis matches a *RedisError: Redis could not be reached or failed,
	// so no decision was made.
	ErrRedis = errors.New("quota: redis failed")
	// ErrFormat matches errors about state in Redis that this version of
	// tollgate cannot read: keys written by a process of another Redis
	// format (see the package documentation) sharing the Redis and prefix.
	// Nothing was decided or written; upgrade every process, or give each
	// format its own prefix.
	ErrFormat = errors.New("quota: redis holds tollgate state of another format")
)

// invalidError describes an argument the limiter cannot use. It matches ErrInvalid.
type invalidError struct{ what, why string }

func invalid(what, why string) error { return &invalidError{what: what, why: why} }

func (e *invalidError) Error() string { return "quota: invalid " + e.what + ": " + e.why }

// Is reports whether target is ErrInvalid.
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// CostError reports a charge of more units than one of its limits holds:
// such a call can never be admitted. It matches ErrCostExceedsLimit and
// ErrInvalid.
type CostError struct {
	Bucket string // the charge's bucket, e.g. "search"
	Units  int64  // the units asked for, e.g. 1600
	Limit  Limit  // the limit they exceed, e.g. 1000/day@America/Los_Angeles
}

func (e *CostError) Error() string {
	return fmt.Sprintf("quota: %d units for bucket %q exceed limit %v", e.Units, e.Bucket, e.Limit)
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
	// Bucket is the cap whose slot was not free, when ReserveCapped was
	// refused a slot, e.g. "concurrent"; empty otherwise.
	Bucket string
	// RetryAfter is how long after the decision the cost would fit, given
	// what was recorded then, e.g. 41.2s. It is zero when unknown.
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("quota: refused: no room before the deadline; retry after %v", readable(e.RetryAfter))
}

// readable rounds a wait up to what a person reads in a message: whole
// milliseconds under a second, tenths of a second under a minute, whole
// seconds above (24h0m0.049813s reads 24h0m1s). The field keeps the exact
// wait.
func readable(d time.Duration) time.Duration {
	unit := time.Second
	switch {
	case d < time.Second:
		unit = time.Millisecond
	case d < time.Minute:
		unit = 100 * time.Millisecond
	}
	if r := d % unit; r > 0 {
		d += unit - r
	}
	return d
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// redisError wraps a failed command. When the caller's context ended, the
// context's error is returned instead: the caller gave up, which says
// nothing about Redis. A script that met state of another Redis format
// returns a *formatError, which is no Redis failure; nor is a refusal by
// Redis's access control (*permissionError).
func redisError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if fe := asFormatError(err); fe != nil {
		return fe
	}
	if pe := asPermissionError(op, err); pe != nil {
		return pe
	}
	// A client that honours deadlines may time out a hair before the
	// context's own timer fires.
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return &RedisError{Op: op, Err: err}
}

// formatError reports state of another Redis format; it matches ErrFormat.
type formatError struct{ msg string }

// asFormatError finds a script's FORMAT error in what Redis answered,
// which may wrap it ("ERR ... script: <sha>, on @user_script:1.").
func asFormatError(err error) *formatError {
	var re redis.Error
	if !errors.As(err, &re) {
		return nil
	}
	msg := re.Error()
	i := strings.Index(msg, "FORMAT tollgate: ")
	if i < 0 {
		return nil
	}
	msg = msg[i+len("FORMAT tollgate: "):]
	for _, tail := range []string{" script: ", " stack traceback"} {
		if j := strings.Index(msg, tail); j >= 0 {
			msg = msg[:j]
		}
	}
	return &formatError{msg: msg}
}

func (e *formatError) Error() string        { return "quota: " + e.msg }
func (e *formatError) Is(target error) bool { return target == ErrFormat }

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
