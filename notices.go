package tollgate

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/lease"
	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/internal/remember"
	"github.com/tollgate/tollgate/quota"
)

// Pauses and resumes told by other processes (cmd/tollgate pause, another
// process's Transport.Pause or an upstream's 429), heard while the
// Transport has anything they must reach (internal/notices): a pause ends
// the leases it concerns, is remembered as a refusal of the scope buckets
// this process decided on, and stops the waits it concerns (pauses.go); a
// resume forgets the refusals it concerns, and reaches the requests
// waiting for a hold's turn as a pause does: their holds, dated after a
// pause that no longer holds, are given back and they decide again.

// hearing applies the notices the Transport hears.
type hearing struct {
	limiter   *quota.Limiter
	refusals  *remember.Refusals
	leases    *lease.Leases
	listening *notices.Listening
	waiters   *notices.Waiters
	described *described
	clock     *clock
	resumes   resumes
}

// apply makes a notice hold in this process.
func (h *hearing) apply(ctx context.Context, n quota.Notice) {
	if n.Confirmed {
		h.resumes.end(n.ID)
		return
	}
	if n.Resume {
		h.refusals.Forget(func(k remember.Key) bool { return n.Concerns(k.Scope, k.Bucket) })
		h.redecideWaiters(ctx, n)
		return
	}
	h.listening.NextIfLive() // a request that waited through it reads Redis, unless stopped here
	now := h.clock.now()
	until := now.Add(n.Left)
	reads := &pauseReads{lim: h.limiter, n: n, now: now}
	h.stopWaiters(ctx, reads)
	for _, k := range h.described.known() {
		switch {
		case n.Concerns(k.scope, ""):
			pw := reads.of(ctx, k.scope, "")
			h.refusals.Note(remember.Key{Scope: k.scope}, pausedUntil(pw, until), now)
		case n.Concerns(k.scope, k.bucket):
			pw := reads.of(ctx, k.scope, k.bucket)
			h.refusals.Note(remember.Key{Scope: k.scope, Bucket: k.bucket}, pausedUntil(pw, until), now)
		}
	}
	h.leases.End(ctx, func(k lease.Key) bool { return n.Concerns(k.Scope, k.Bucket) })
}

// pausedUntil is what the Transport remembers of a pause.
func pausedUntil(pw *pausedWait, until time.Time) remember.Refusal {
	return remember.Refusal{Until: until, Cause: uint8(pw.cause), Pause: true, Reason: pw.reason}
}

// resync forgets the pauses remembered that Redis no longer holds.
func (h *hearing) resync(ctx context.Context) {
	for _, k := range h.refusals.Pauses(h.clock.now()) {
		scope, err := h.limiter.PauseOf(ctx, k.Scope, "")
		if err != nil || !scope.Until.IsZero() {
			continue
		}
		if k.Bucket != "" {
			if p, err := h.limiter.PauseOf(ctx, k.Scope, k.Bucket); err != nil || !p.Until.IsZero() {
				continue
			}
		}
		h.refusals.Forget(func(f remember.Key) bool { return f == k })
	}
}

// stopWaiters gives back the holds of the requests waiting in what the
// pause notice concerns, together, and wakes them to decide again: before
// the notice is acknowledged, so that when the operator's command returns
// no unit is held for them.
func (h *hearing) stopWaiters(ctx context.Context, reads *pauseReads) {
	taken := h.waiters.Take(reads.n)
	if len(taken) == 0 {
		return
	}
	var wg sync.WaitGroup
	for w, bucket := range taken {
		reads.of(ctx, w.Scope, bucket)
		if w.Hold != nil {
			wg.Go(func() { _ = w.Hold.Cancel(ctx) }) // concurrent: the limiter pipelines them
		}
	}
	wg.Wait()
	for w, bucket := range taken {
		w.Stop(reads.of(ctx, w.Scope, bucket))
	}
}

// redecideWaiters gives back, together, the holds of the requests waiting
// in what the resume notice concerns, dated after a pause it lifted,
// before the notice is acknowledged; the requests decide again, as
// requests arriving now, once the operator's tool confirms that every
// process listening has given its holds back (Notice.Confirmed), or after
// resumeSettle: deciding earlier, a request would be placed behind the
// holds another process is about to give back, and wait for nothing.
func (h *hearing) redecideWaiters(ctx context.Context, n quota.Notice) {
	taken := h.waiters.Take(n)
	if len(taken) == 0 {
		return
	}
	var wg sync.WaitGroup
	for w := range taken {
		wg.Go(func() { _ = w.Hold.Cancel(ctx) }) // concurrent: the limiter pipelines them
	}
	wg.Wait()
	rw := &resumedWait{ready: h.resumes.start(n.ID)}
	for w := range taken {
		w.Stop(rw)
	}
}

// resumeSettle bounds how long requests a resume reached wait for its
// confirmation before they decide again: a resume told without
// ops.Operator.Confirm is never confirmed.
const resumeSettle = 2 * time.Second

// resumes are the resumes heard whose requests wait for their
// confirmation. The zero value holds none; it is safe for concurrent use.
type resumes struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// start returns the channel closed when the resume id is confirmed, or
// resumeSettle from now.
func (rs *resumes) start(id string) <-chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ch, ok := rs.m[id]; ok {
		return ch
	}
	if rs.m == nil {
		rs.m = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	rs.m[id] = ch
	time.AfterFunc(resumeSettle, func() { rs.end(id) })
	return ch
}

// end closes the channel of the resume id, if it is open.
func (rs *resumes) end(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ch, ok := rs.m[id]; ok {
		close(ch)
		delete(rs.m, id)
	}
}

// pauseReads reads, once each, the pauses a notice told, for the scope
// buckets it concerns ("" for a whole scope's).
type pauseReads struct {
	lim *quota.Limiter
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
	if p, err := r.lim.PauseOf(ctx, scope, bucket); err == nil && !p.Until.IsZero() {
		pw.cause, pw.reason = pauseCause(p), p.Reason
	}
	if r.m == nil {
		r.m = make(map[scopeBucket]*pausedWait)
	}
	r.m[k] = pw
	return pw
}
