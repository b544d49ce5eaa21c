package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/quota"
)

// maxRedecisions bounds how often a waiting request is decided again
// because announcements kept changing its buckets' limits; maxPauses, how
// often because pauses reached it (and, apart, how often resumes did).
const (
	maxRedecisions = 4
	maxPauses      = 8
)

// waitTurn waits for the request's gates and slots, then takes a hold in
// its own scope and sleeps until it is due. Its waits end within the
// policy's MaxWait and the context's deadline: a slot or hold that would
// come later is refused (or given back) at once. The decisions' own round
// trips are bounded by the context alone: a request with room now is
// admitted however short its MaxWait. A pause that reaches it while it
// waits, a resume that reaches its hold, or an announcement that changes
// its bucket's limit, gives back what it holds and decides it again.
func (p *decision) waitTurn(ctx context.Context, d *decider, r *request) error {
	wctx := ctx
	if limit := r.policy.waitLimit(); limit >= 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	maxWait := func() time.Duration { // 0: only what is free now
		if deadline, bounded := wctx.Deadline(); bounded {
			return max(time.Until(deadline), 0) // the wall clock: a context's deadline
		}
		return -1
	}
	refused := func(err error) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return r.refused(r.scope, "", CapFull, 0, "")
		}
		return err
	}
	apart := false // a cap's slot was not free with the units: take it waiting
	for redecided, paused, resumed := 0, 0, 0; ; {
		if err := p.gates.learning(ctx, d, r, r.scope, maxWait()); err != nil {
			return refused(err)
		}
		// The slots with the units, in one round trip (together.go).
		together := !apart && d.capped(r) && d.together(r, p.limits.charges(d, r, r.scope))
		if err := p.slotsTurn(ctx, wctx, d, r, maxWait(), together); err != nil {
			p.gates.release(ctx, r, heldAll)
			if pw := pausedBy(err); pw != nil {
				if paused == maxPauses {
					return pw.refusal(r)
				}
				if err := sitOut(wctx, r, pw); err != nil {
					return err
				}
				paused++
				continue
			}
			return refused(err)
		}
		charges := p.limits.charges(d, r, r.scope)
		if len(charges) == 0 {
			return nil
		}
		learned := p.learnedGen(r)
		if err := p.waitUnits(ctx, wctx, d, r, charges, together); err != nil {
			p.gates.release(ctx, r, heldAll)
			if err == errCapBusy {
				apart = true
				continue
			}
			if err == errResumed {
				// A resume gave the hold back: decide again, as a
				// request arriving now would.
				if resumed < maxPauses {
					resumed++
					continue
				}
				return r.refused(r.scope, "", noRoom(d), 0, "")
			}
			if pw := pausedBy(err); pw != nil {
				// A pause reached the hold: it was given back, and the
				// request decides again, as one arriving now would.
				if paused < maxPauses {
					if err := sitOut(wctx, r, pw); err != nil {
						return err
					}
					paused++
					continue
				}
				err = pw.refusal(r)
			}
			if errors.Is(err, learn.ErrChanged) && redecided < maxRedecisions {
				redecided++
				continue
			}
			if errors.Is(err, learn.ErrChanged) {
				err = r.refused(r.scope, "", noRoom(d), 0, "")
			}
			return err
		}
		if redecided == maxRedecisions || !p.outdated(r, learned) {
			return nil
		}
		redecided++
		// An announcement changed the bucket's limit or window while the
		// hold waited: decide again, under what it said.
		p.gates.release(ctx, r, heldAll)
	}
}

// bucketsOf returns the buckets the request charges.
func bucketsOf(r *request) []string {
	out := make([]string, len(r.endpoint.Charges))
	for i, ch := range r.endpoint.Charges {
		out[i] = ch.Bucket
	}
	return out
}

// waitUnits takes a hold for the request's units and sleeps until it is
// due, within wctx's deadline. together, it takes the request's slots in
// the same round trip (together.go), or, when one is not free now,
// nothing, and returns errCapBusy.
func (p *decision) waitUnits(ctx, wctx context.Context, d *decider, r *request, charges []quota.Demand, together bool) error {
	maxWait := time.Duration(-1)
	deadline, bounded := wctx.Deadline()
	if bounded {
		maxWait = max(time.Until(deadline), 0) // the wall clock: a context's deadline
	}
	heard, resumes := p.listening.Heard(), p.waiters.Resumes()
	// On ctx: MaxWait bounds the wait for a turn, not the decision's round trip.
	res, err := p.reserveUnits(ctx, d, r, maxWait, charges, together)
	if err == errCapBusy {
		return err
	}
	if err != nil {
		return limiterError(d, r, r.scope, err)
	}
	if !res.OK() {
		return p.refusal(ctx, d, r, r.scope, res)
	}
	r.res, r.at = res, time.Now().Add(res.Delay()) // the wall clock: Transit's deadline (send.go)
	if bounded && r.at.After(deadline) && (res.Delay() > 0 || ctx.Err() != nil) {
		// The round trip ate the time the hold needed: give it back now
		// rather than sleep until the deadline to fail.
		p.gates.release(ctx, r, heldUnits)
		if err := ctx.Err(); err != nil {
			return err
		}
		return r.refused(r.scope, "", noRoom(d), res.Delay(), "")
	}
	waits := res.Delay() > 0
	start := p.clock.now()
	hctx := wctx
	var w *notices.Waiter // registered for pauses and resumes to reach
	if waits {
		var stop context.CancelCauseFunc
		hctx, stop = context.WithCancelCause(wctx)
		defer stop(nil)
		if !d.local { // while Redis is down, nobody can tell a pause
			w = &notices.Waiter{Scope: r.scope, Buckets: bucketsOf(r), Hold: res, Stop: stop}
			p.waiters.Add(w)
			p.listening.Listen(ctx)
			defer p.listening.Unlisten()
			var resumed bool
			if heard, resumed = p.pausesAtHold(ctx, r, w, res, heard, resumes); resumed {
				p.gates.release(ctx, r, heldUnits)
				r.res = nil
				return errResumed
			}
		}
		if keys := p.announcedKeys(r); len(keys) > 0 {
			p.holds.Add(keys, res, stop)
			defer p.holds.Remove(keys, res)
		}
		defer p.hooks.beginWait(r, start).end()
		p.hooks.waits(ctx, r, waitStarts, detail{at: res.Time()})
	}
	err = res.Wait(hctx)
	if w != nil && !p.waiters.Remove(w) {
		// A pause took the waiter as its turn came: its hold is being
		// given back, and it is about to be stopped.
		<-hctx.Done()
		err = context.Cause(hctx)
	}
	if err == nil && waits && !d.local {
		if pw := p.pauseAfterWait(ctx, r, heard); pw != nil {
			p.gates.release(ctx, r, heldUnits)
			err = pw
		}
	}
	if err != nil {
		r.res = nil // the hold was given back
		switch pw := pausedBy(context.Cause(hctx)); {
		case errors.Is(context.Cause(hctx), learn.ErrChanged):
			err = learn.ErrChanged
		case ctx.Err() == nil && resumedBy(context.Cause(hctx)) != nil:
			// Still listening: the resume's confirmation must be heard.
			select {
			case <-resumedBy(context.Cause(hctx)).ready:
				err = errResumed
			case <-ctx.Done():
				err = ctx.Err()
			}
		case pw != nil:
			err = pw
		case pausedBy(err) != nil:
		case ctx.Err() == nil:
			err = r.refused(r.scope, "", noRoom(d), time.Until(deadline), "") // the wall clock: a context's deadline
		}
	}
	if waits {
		p.hooks.waits(ctx, r, waitEnds, detail{at: res.Time(), waited: p.clock.now().Sub(start), err: err})
	}
	return err
}

// learnedGen returns the generation of what is learned of each announced
// bucket the request charges, in its scope.
func (p *decision) learnedGen(r *request) []uint64 {
	if len(p.limits.announced) == 0 {
		return nil
	}
	gens := make([]uint64, len(r.endpoint.Charges))
	for i, ch := range r.endpoint.Charges {
		if _, ok := p.limits.announced[ch.Bucket]; ok {
			gens[i] = p.limits.learned.Get(learn.Key{Scope: r.scope, Bucket: ch.Bucket}).Gen
		}
	}
	return gens
}

// outdated reports whether a request decided when its buckets were at
// generations gens must be decided again: an announcement changed a
// bucket's limit or window since.
func (p *decision) outdated(r *request, gens []uint64) bool {
	for i, ch := range r.endpoint.Charges {
		if _, ok := p.limits.announced[ch.Bucket]; !ok {
			continue
		}
		if p.limits.learned.Get(learn.Key{Scope: r.scope, Bucket: ch.Bucket}).Gen != gens[i] {
			return true
		}
	}
	return false
}

// announcedKeys returns the announced buckets a request charges, in its
// scope.
func (p *decision) announcedKeys(r *request) []learn.Key {
	var keys []learn.Key
	for _, ch := range r.endpoint.Charges {
		if _, ok := p.limits.announced[ch.Bucket]; ok {
			keys = append(keys, learn.Key{Scope: r.scope, Bucket: ch.Bucket})
		}
	}
	return keys
}
