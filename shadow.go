package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/internal/remember"
)

// shadow is the Shadow action: the request is decided as under Refuse,
// and sent whatever the decision, unless a pause refused it. A request
// the quota has no room for is charged all the same: its units are
// recorded in the windows (quota.Limiter.Record, which checks no limit),
// as the upstream will spend them; the refusal it would have had is told
// to the Trace (WouldRefuse) and counted for status (would-refuse). A
// request refused only by a cap's slot (CapFull) asks for its units
// without the slot: reserved when they fit, recorded when they do not,
// refused when a pause stops them. It never waits.
//
// A would-be refusal costs two round trips more (the pauses read, the
// units recorded); a pause this process remembers refuses a shadow
// request before Redis (remembered.go); an
// admitted request costs what it does under Refuse. Units recorded so
// have no reservation: they are not settled after the response, nor given
// back when the request never reaches the upstream.
func (p *decision) shadow(ctx context.Context, d *decider, r *request) error {
	err := p.admitNow(ctx, d, r, r.scope)
	var would *QuotaError
	if err == nil || !errors.As(err, &would) || would.Cause.Paused() {
		return err
	}
	charges := p.limits.charges(d, r, r.scope)
	if would.Cause == CapFull && len(charges) > 0 { // its units were not asked
		res, err := d.lim.Allow(ctx, r.scope, charges...)
		if err != nil {
			return limiterError(d, r, r.scope, err)
		}
		if res.OK() { // reserved: sent without the slot
			r.res, r.at = res, time.Now() // the wall clock: Transit's deadline (send.go)
			r.shadowed = true
			p.hooks.wouldRefuse(ctx, r, would)
			return nil
		}
		if qe := p.refusal(ctx, d, r, r.scope, res); qe.Cause.Paused() {
			return qe
		}
	}
	// No room hides a pause: Redis names the bucket without room. Read
	// the pauses of the scope and its buckets (one round trip).
	if pw, err := pauseOf(ctx, d.lim, r); err != nil {
		return limiterError(d, r, r.scope, err)
	} else if pw != nil {
		qe := pw.refusal(r)
		if !d.local && !r.background && qe.RetryAfter > 0 {
			p.refusals.Note(remember.Key{Scope: r.scope, Bucket: pw.bucket}, rememberOf(qe, r.now), r.now)
		}
		return qe
	}
	if len(charges) > 0 {
		if err := d.lim.Record(ctx, r.scope, charges...); err != nil {
			return limiterError(d, r, r.scope, err)
		}
	}
	r.shadowed = true
	p.hooks.wouldRefuse(ctx, r, would)
	return nil
}
