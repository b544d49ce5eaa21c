package quota

import (
	"context"
	"time"
)

// unbounded is the maxwait of a hold that may lie at any instant: further
// than any calendar a decision is sent, so the limits alone decide.
const unbounded = int64(1) << 53

// Allow decides at once whether the demands' units may be spent now. When
// they may, the units are recorded and the reservation is OK; otherwise
// nothing is recorded and RetryAfter says when they would fit. An error means no
// decision was made: invalid input (ErrInvalid, ErrCostExceedsLimit), a
// Redis failure (ErrRedis), or state of another Redis format (ErrFormat).
func (l *Limiter) Allow(ctx context.Context, scope string, demands ...Demand) (*Reservation, error) {
	return l.reserve(ctx, scope, 0, demands)
}

// Reserve records the demands at the earliest instant they fit, provided it
// lies no more than maxWait after now (a negative maxWait means no bound), and
// returns a reservation whose Delay says how long to wait before acting. The
// hold counts at once: later callers queue behind it. When the instant lies
// beyond maxWait, nothing is recorded and the reservation is not OK. Call
// Cancel if the call will not be made.
//
// A Background call (see WithPriority) never takes a hold, so that an
// interactive call arriving later can still be admitted first: Reserve
// waits its turn in the scope's background room, up to maxWait, and
// returns it admitted now, or refused. On a bucket with Shares, a call of
// a tenant at or above its share never holds either, so that a tenant
// below its share goes first: it waits its turn in the bucket's room
// likewise (see Shares), as does a Background call there.
func (l *Limiter) Reserve(ctx context.Context, scope string, maxWait time.Duration, demands ...Demand) (*Reservation, error) {
	wait := unbounded
	if maxWait >= 0 {
		wait = maxWait.Microseconds()
	}
	return l.reserve(ctx, scope, wait, demands)
}

// Wait takes a hold like Reserve and sleeps until it is due. It fails at
// once with a *RefusedError when the demands would not fit before ctx's
// deadline, and when ctx ends while waiting it gives the units back and
// returns ctx.Err().
func (l *Limiter) Wait(ctx context.Context, scope string, demands ...Demand) (*Reservation, error) {
	maxWait := time.Duration(-1)
	if deadline, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(deadline), 0)
	}
	r, err := l.Reserve(ctx, scope, maxWait, demands...)
	if err != nil {
		return nil, err
	}
	if !r.OK() {
		return r, &RefusedError{Scope: scope, RetryAfter: r.RetryAfter()}
	}
	if err := r.Wait(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// reserve runs the reserve script with maxWait in µs: 0 asks for an
// immediate decision. A background call (see WithPriority) is decided in
// its scope's background room instead.
func (l *Limiter) reserve(ctx context.Context, scope string, maxWait int64, charges []Demand) (*Reservation, error) {
	if isFair(charges) {
		return l.fairReserve(ctx, scope, maxWait, charges)
	}
	if priorityOf(ctx) == Background {
		return l.background(ctx, scope, maxWait, charges)
	}
	keys, args, seq, err := l.decision(scope, maxWait, charges, false)
	if err != nil {
		return nil, err
	}
	return l.decide(ctx, reserveScript, scope, charges, seq, withoutBucketLogs(keys, charges), args)
}
