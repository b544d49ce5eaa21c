package tollgate

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/internal/notices"
)

// A capped request's wait for its caps' slots, before its units' turn
// (wait.go). A slot that is free now is taken at once; one that is not is
// waited for in the cap's arrival order, where pauses reach the waiter as
// they reach a hold of units. When the slots come with the units in one
// round trip (together.go) there is nothing to wait for here.

// slotsTurn takes the request's slots (waitSlots). A request that charges
// no units and waited for them then reads whether a pause it may have
// missed meanwhile stops it: no decision of its units follows to refuse
// it, as one does for a request that charges units (waitUnits).
func (p *decision) slotsTurn(ctx, wctx context.Context, d *decider, r *request, maxWait time.Duration, together bool) error {
	waited, err := p.waitSlots(ctx, wctx, d, r, maxWait, together)
	if err == nil && waited != nil && (r.endpoint.Free || len(r.endpoint.Charges) == 0) {
		if pw := p.pauseAfterWait(ctx, r, *waited); pw != nil {
			return pw
		}
	}
	return err
}

// waitSlots takes the request's slots, now if they are free; otherwise it
// waits for them, where pauses reach it, up to maxWait. When it waited,
// waited holds what the Transport heard before (for pauseAfterWait); a
// pause that reached it is returned as its error. together, it takes
// none: they come with the units (reserveUnits, together.go).
func (p *decision) waitSlots(ctx, wctx context.Context, d *decider, r *request, maxWait time.Duration, together bool) (waited *uint64, err error) {
	if together {
		return nil, nil
	}
	err = p.gates.slots(ctx, d, r, r.scope, 0) // on ctx: the round trip is not the wait
	if err == nil {
		return nil, nil
	}
	if qe, ok := err.(*QuotaError); !ok || qe.Cause != CapFull {
		return nil, err
	}
	heard := p.listening.Heard()
	sctx, stop := context.WithCancelCause(wctx)
	defer stop(nil)
	defer p.hooks.beginWait(r, p.clock.now()).end()
	var w *notices.Waiter
	if !d.local {
		w = &notices.Waiter{Scope: r.scope, Buckets: bucketsOf(r), Stop: stop}
		p.waiters.Add(w)
		p.listening.Listen(ctx)
		defer p.listening.Unlisten()
	}
	err = p.gates.slots(sctx, d, r, r.scope, maxWait)
	if w != nil && !p.waiters.Remove(w) {
		<-sctx.Done() // a pause took the waiter, and is about to stop it
	}
	if pw := pausedBy(context.Cause(sctx)); pw != nil {
		p.gates.release(ctx, r, heldSlots)
		return nil, pw
	}
	return &heard, err
}
