package tollgate

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Pauses reach the requests that wait. A request waiting for its hold's
// turn, or for a slot of a cap, was decided before the pause: left alone,
// it would be sent when its turn came, into the wall. So while it waits,
// the Transport listens (notices.go), and a pause told for its scope or
// one of its buckets, by this process or another, gives its hold or its
// place back at once and decides it again, as a request arriving during
// the pause: refused with the pause's cause and reason when the pause ends
// after its MaxWait or its context's deadline, otherwise dated after the
// pause. When the Transport could not listen throughout the wait (the
// subscription broke, or was made after the hold was taken), the request
// reads the pauses in Redis before it is sent: one round trip, for
// requests that waited only.

// waiter is a request waiting for a hold's turn or a cap's slot.
type waiter struct {
	scope   string
	buckets []string
	hold    *quota.Reservation // nil while it waits for a slot
	stop    context.CancelCauseFunc
}

// waiters are the Transport's requests that wait.
type waiters struct {
	mu sync.Mutex
	m  map[*waiter]struct{}
}

func (ws *waiters) add(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = make(map[*waiter]struct{})
	}
	ws.m[w] = struct{}{}
}

// remove forgets w, and reports whether it was there: false when a pause
// took it (take), and is about to stop it.
func (ws *waiters) remove(w *waiter) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_, ok := ws.m[w]
	delete(ws.m, w)
	return ok
}

// take forgets and returns the waiters a notice concerns, with the bucket
// it concerns of each ("" for the whole scope).
func (ws *waiters) take(n quota.Notice) map[*waiter]string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out map[*waiter]string
	for w := range ws.m {
		bucket, ok := "", n.Concerns(w.scope, "")
		for _, b := range w.buckets {
			if !ok && n.Concerns(w.scope, b) {
				bucket, ok = b, true
			}
		}
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[*waiter]string)
		}
		out[w] = bucket
		delete(ws.m, w)
	}
	return out
}

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

// pauseCause is the cause of refusals during p.
func pauseCause(p quota.Paused) Cause {
	if p.Upstream {
		return PausedByUpstream
	}
	return PausedByOperator
}

// pauseReads reads, once each, the pauses a notice told, for the scope
// buckets it concerns ("" for a whole scope's).
type pauseReads struct {
	t   *Transport
	n   quota.Notice
	now time.Time
	m   map[scopeBucket]*pausedWait
}

// of returns the pause of bucket in scope the notice told. One whose
// pause cannot be read takes the notice's word, as an operator's pause.
func (r *pauseReads) of(ctx context.Context, scope, bucket string) *pausedWait {
	k := scopeBucket{scope, bucket}
	if pw := r.m[k]; pw != nil {
		return pw
	}
	pw := &pausedWait{bucket: bucket, until: r.now.Add(r.n.Left), cause: PausedByOperator}
	if p, err := r.t.cfg.Limiter.PauseOf(ctx, scope, bucket); err == nil && !p.Until.IsZero() {
		pw.cause, pw.reason = pauseCause(p), p.Reason
	}
	if r.m == nil {
		r.m = make(map[scopeBucket]*pausedWait)
	}
	r.m[k] = pw
	return pw
}

// stopWaiters gives back the holds of the requests waiting in what the
// pause notice concerns, together, and wakes them to decide again: before
// the notice is acknowledged, so that when the operator's command returns
// no unit is held for them.
func (t *Transport) stopWaiters(ctx context.Context, reads *pauseReads) {
	taken := t.waiters.take(reads.n)
	if len(taken) == 0 {
		return
	}
	var wg sync.WaitGroup
	for w, bucket := range taken {
		reads.of(ctx, w.scope, bucket)
		if w.hold != nil {
			wg.Go(func() { _ = w.hold.Cancel(ctx) }) // concurrent: the limiter pipelines them
		}
	}
	wg.Wait()
	for w, bucket := range taken {
		w.stop(reads.of(ctx, w.scope, bucket))
	}
}

// pauseAfterWait reads, when the Transport may have missed a notice while
// the request waited, whether a pause now stops it (one round trip).
// heard is listening.heard's value before the wait began.
func (t *Transport) pauseAfterWait(ctx context.Context, c *call, heard uint64) *pausedWait {
	if heard != 0 && t.listening.heard() == heard {
		return nil // listening throughout: a pause would have stopped the wait
	}
	buckets := make([]string, 0, len(c.endpoint.Charges)+1)
	buckets = append(buckets, "")
	for _, ch := range c.endpoint.Charges {
		buckets = append(buckets, ch.Bucket)
	}
	bucket, p, err := t.cfg.Limiter.PauseAmong(ctx, c.scope, buckets...)
	if err != nil || p.Until.IsZero() {
		return nil // Redis decided this request; what it cannot say now, it could not stop
	}
	return &pausedWait{bucket: bucket, until: p.Until, cause: pauseCause(p), reason: p.Reason}
}

// sitOut decides what a pause that reached a waiting request makes of it:
// a refusal when the request is free (free requests honour the pauses
// this process knows of), or when the pause ends after the wait's
// deadline; nil when it may decide again.
func (t *Transport) sitOut(wctx context.Context, c *call, pw *pausedWait) error {
	deadline, bounded := wctx.Deadline()
	if !c.endpoint.Free && (!bounded || !pw.until.After(deadline)) {
		return nil
	}
	return pw.refusal(c)
}

// refusal is the *QuotaError of a request the pause stops.
func (p *pausedWait) refusal(c *call) *QuotaError {
	qe := &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Bucket: p.bucket, Units: c.endpoint.Units(),
		RetryAfter: max(time.Until(p.until), 0), Cause: p.cause, Reason: p.reason}
	if p.bucket != "" {
		qe.Units = unitsOf(c.endpoint, p.bucket)
	}
	return qe
}
