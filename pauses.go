package tollgate

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota"
)

// What the request path asks of a quota.Limiter that users never call
// (see internal/quotapath): an upstream's pause, told to every process;
// the pause that ends last among a scope and its buckets; a context's
// priority.
var (
	pauseUpstream = quotapath.PauseUpstream.(func(l *quota.Limiter, ctx context.Context, scope, bucket string, d time.Duration, reason string) (quota.Paused, error))
	pauseAmong    = quotapath.PauseAmong.(func(l *quota.Limiter, ctx context.Context, scope string, buckets ...string) (string, quota.Paused, error))
)

// priorityOf returns the priority ctx carries (quota.WithPriority),
// Interactive when none.
func priorityOf(ctx context.Context) quota.Priority {
	p, _ := ctx.Value(quotapath.PriorityKey{}).(quota.Priority)
	return p
}

// Pauses reach the requests that wait. A request waiting for its hold's
// turn, or for a slot of a cap, was decided before the pause: left alone,
// it would be sent when its turn came, into the wall. So while it waits,
// the Transport listens (internal/notices, notices.go), and a pause told
// for its scope or one of its buckets, by this process or another, gives
// its hold or its place back at once and decides it again, as a request
// arriving during the pause: refused with the pause's cause and reason
// when the pause ends after its MaxWait or its context's deadline,
// otherwise dated after the pause. When the Transport could not listen
// throughout the wait (the subscription broke, or was made after the hold
// was taken), the request reads the pauses in Redis before it is sent: one
// round trip, for requests that waited only. A resume reaches the
// requests waiting for a hold's turn the same way: each gives its hold
// back and decides again, so that what waited behind the pause is served
// as soon as there is room.

// errResumed ends a wait a resume reached: the hold, dated after a pause
// the resume lifted, was given back, and the request decides again.
var errResumed = errors.New("tollgate: a resume reached a waiting request")

// resumedWait is the cause that stops a wait a resume reached: ready is
// closed once the request may decide again (notices.go).
type resumedWait struct{ ready <-chan struct{} }

func (*resumedWait) Error() string { return errResumed.Error() }

// pausedWait is the cause that ends a wait a pause reached: the pause, as
// the refusal it makes for a request that cannot wait it out.
type pausedWait struct {
	bucket string // "" for the whole scope
	until  time.Time
	cause  Cause
	reason string
}

func (p *pausedWait) Error() string {
	return "tollgate: a pause (" + p.cause.String() + ") reached a waiting request"
}

// pausedBy returns the pause that ended a wait with err, or nil.
func pausedBy(err error) *pausedWait {
	pw, _ := err.(*pausedWait)
	return pw
}

// refusal is the *QuotaError of a request the pause stops.
func (p *pausedWait) refusal(r *request) *QuotaError {
	// The wall clock: the wait the pause ends is bounded by a context's
	// deadline, and the pause's end is an instant Redis told.
	return r.refused(r.scope, p.bucket, p.cause, max(time.Until(p.until), 0), p.reason)
}

// pauseCause is the cause of refusals during p.
func pauseCause(p quota.Paused) Cause {
	if p.Upstream {
		return PausedByUpstream
	}
	return PausedByOperator
}

// pauseAfterWait reads, when the Transport may have missed a notice while
// the request waited, whether a pause now stops it (one round trip).
// heard is what the Transport heard before the wait began.
func (p *decision) pauseAfterWait(ctx context.Context, r *request, heard uint64) *pausedWait {
	if heard != 0 && p.listening.Heard() == heard {
		return nil // listening throughout: a pause would have stopped the wait
	}
	pw, _ := pauseOf(ctx, p.limiter, r)
	return pw // nil when Redis did not answer: what it cannot say now, it could not stop
}

// pauseOf reads, in one round trip, the pause that ends last among the
// request's scope and the buckets it charges: nil when there is none.
func pauseOf(ctx context.Context, lim *quota.Limiter, r *request) (*pausedWait, error) {
	buckets := make([]string, 0, len(r.endpoint.Charges)+1)
	buckets = append(buckets, "")
	for _, ch := range r.endpoint.Charges {
		buckets = append(buckets, ch.Bucket)
	}
	bucket, pz, err := pauseAmong(lim, ctx, r.scope, buckets...)
	if err != nil || pz.Until.IsZero() {
		return nil, err
	}
	return &pausedWait{bucket: bucket, until: pz.Until, cause: pauseCause(pz), reason: pz.Reason}, nil
}

// pausesAtHold reads what a waiting hold may have missed, once w is
// registered and the Transport listens, so that pauses and resumes reach
// it from now on; heard and resumes are what the Transport had heard
// before the decision.
//
// It reports resumed, having taken w back, when a resume may have been
// told in between: one applied meanwhile, or, when nothing listened then,
// a hold a pause dated whose pause Redis no longer holds. Such a hold
// would wait for a pause lifted already.
//
// Otherwise it returns the generation pauseAfterWait is to compare with.
// When nothing listened at the decision, a pause told in between reached
// nobody: the pauses are read now, while the turn is ahead, rather than
// after it, where, for a process far from its Redis, the round trip would
// make the request reach its upstream later than Transit after its turn,
// and be decided again. With none found, it returns the generation heard
// before the read, so that a request whose process hears nothing new
// reads nothing after the wait; it returns 0 (read after the wait) while
// nothing listens, when a pause was found, or when Redis did not answer.
// One round trip at most, for holds decided while nothing listened.
func (p *decision) pausesAtHold(ctx context.Context, r *request, w *notices.Waiter, res *quota.Reservation, heard, resumes uint64) (after uint64, resumed bool) {
	if p.waiters.Resumes() != resumes && p.waiters.Remove(w) {
		return 0, true
	}
	if heard != 0 {
		return heard, false
	}
	live := p.listening.Heard()
	c, ok := res.Constraint()
	datedByPause := ok && c.Paused
	if live == 0 && !datedByPause {
		return 0, false
	}
	pw, err := pauseOf(ctx, p.limiter, r)
	if err != nil {
		return 0, false
	}
	if datedByPause && (pw == nil || pw.until.Before(res.Time())) && p.waiters.Remove(w) {
		return 0, true
	}
	if pw != nil {
		return 0, false
	}
	return live, false
}

// sitOut decides what a pause that reached a waiting request makes of it:
// a refusal when the request is free (free requests honour the pauses
// this process knows of), or when the pause ends after the wait's
// deadline; nil when it may decide again.
func sitOut(wctx context.Context, r *request, pw *pausedWait) error {
	deadline, bounded := wctx.Deadline()
	if !r.endpoint.Free && (!bounded || !pw.until.After(deadline)) {
		return nil
	}
	return pw.refusal(r)
}

// pauseReason cuts a reason to what a pause may carry, on a character's
// boundary.
func pauseReason(s string) string {
	if len(s) <= quotapath.MaxReason {
		return s
	}
	cut := quotapath.MaxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// resumedBy returns the resume that stopped a wait with cause, or nil.
func resumedBy(cause error) *resumedWait {
	rw, _ := cause.(*resumedWait)
	return rw
}
