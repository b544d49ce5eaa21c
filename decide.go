package tollgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/internal/remember"
	"github.com/tollgate/tollgate/quota"
)

// A decider is a limiter with the limits it enforces: the shared one in
// Redis, or the FailLocal mode's in-process one, holding a share of them
// (limits.go computes them).
type decider struct {
	lim        *quota.Limiter
	limits     map[string][]quota.Limit // for interactive requests
	background map[string][]quota.Limit // the share background requests may spend
	caps       map[string]int           // requests in flight, per bucket that has a cap
	local      bool                     // the FailLocal mode's: its refusals say nothing of Redis
	transit    time.Duration            // what sliding and fixed windows were lengthened by
}

// configured returns l with its window as configured: Transit is
// tollgate's margin, kept out of what people read (errors).
func (d *decider) configured(l quota.Limit) quota.Limit {
	if !l.Calendar && l.Refill == 0 && d.transit > 0 && l.Window > d.transit {
		l.Window -= d.transit
	}
	return l
}

// decision is the stage that asks a limiter for the request's units, as
// its policy says: at once (Refuse), on the next route (Failover), or
// after a hold (WaitTurn, wait.go). In each scope it asks, the request
// takes its gates (gates.go) before its units.
type decision struct {
	redis     *decider
	limits    *limits
	gates     *gates
	refusals  *remember.Refusals
	hooks     *hooks
	routes    []Route
	listening *notices.Listening
	waiters   *notices.Waiters
	holds     *learn.Holds
	limiter   *quota.Limiter // Config.Limiter: where pauses are read
	clock     *clock         // for how long a wait took
}

// apply runs the request's policy on d.
func (p *decision) apply(ctx context.Context, d *decider, r *request) error {
	r.decide(decided, d)
	switch r.policy.OnRefusal {
	case Refuse:
		return p.admitNow(ctx, d, r, r.scope)
	case Failover:
		err := p.admitNow(ctx, d, r, r.scope)
		var first *QuotaError
		if !errors.As(err, &first) {
			return err
		}
		best := first
		for i := range p.routes {
			route := &p.routes[i]
			r.route = route
			if route.Scope == "" {
				return nil // unmetered: a cache, say
			}
			err = p.admitNow(ctx, d, r, route.Scope)
			var qe *QuotaError
			if !errors.As(err, &qe) {
				return err
			}
			if qe.RetryAfter < best.RetryAfter {
				best = qe
			}
		}
		r.route = nil
		if r.policy.AfterFailover == WaitTurn {
			return p.waitTurn(ctx, d, r)
		}
		return best
	case Shadow:
		return p.shadow(ctx, d, r)
	default:
		return p.waitTurn(ctx, d, r)
	}
}

// admitNow takes the gates, slots and units of the request in scope, and
// fails with a *QuotaError when they are not free now.
func (p *decision) admitNow(ctx context.Context, d *decider, r *request, scope string) error {
	if err := p.gates.learning(ctx, d, r, scope, 0); err != nil {
		return err
	}
	var res *quota.Reservation
	var err error
	var epoch uint64
	if charges := p.limits.charges(d, r, scope); d.together(r, charges) {
		var full string
		epoch = p.refusals.Mark()
		res, full, err = p.gates.admit(ctx, d, r, scope, 0, charges) // slots and units in one round trip
		if full != "" {
			p.gates.release(ctx, r, heldAll)
			return r.refused(scope, full, CapFull, 0, "")
		}
	} else {
		if err := p.gates.slots(ctx, d, r, scope, 0); err != nil {
			p.gates.release(ctx, r, heldAll)
			return err
		}
		if len(charges) == 0 { // a free request, held by its slots alone
			return nil
		}
		epoch = p.refusals.Mark()
		res, err = d.lim.Allow(ctx, scope, charges...)
	}
	if err != nil {
		p.gates.release(ctx, r, heldAll)
		return limiterError(d, r, scope, err)
	}
	if !res.OK() {
		p.gates.release(ctx, r, heldAll)
		qe := p.refusal(ctx, d, r, scope, res)
		if !d.local && !r.background && (qe.Bucket != "" || qe.Cause.Paused()) && qe.RetryAfter > 0 && !p.sharedRefusal(qe) {
			p.refusals.NoteSince(epoch, remember.Key{Scope: scope, Bucket: qe.Bucket}, rememberOf(qe, r.now), r.now)
		}
		return qe
	}
	// The wall clock: Transit is a deadline in real time, whatever the
	// Transport's clock says (send.go: handoff).
	r.res, r.at = res, time.Now()
	return nil
}

// rememberOf is what the Transport remembers of a refusal at now.
func rememberOf(qe *QuotaError, now time.Time) remember.Refusal {
	return remember.Refusal{Units: qe.Units, Until: now.Add(qe.RetryAfter), Cause: uint8(qe.Cause), Pause: qe.Cause.Paused(), Reason: qe.Reason}
}

// noRoom is the cause of a refusal by d's count.
func noRoom(d *decider) Cause {
	if d.local {
		return RedisDown
	}
	return NoRoom
}

// limiterError turns a limiter's error into the Transport's: a Redis failure
// stays as it is (the path falls back on it), and so does state of another
// Redis format; units no limit can ever hold are a configuration problem
// (its limit named with the window as configured), or, on the local
// limiter whose limits are a share, a refusal.
func limiterError(d *decider, r *request, scope string, err error) error {
	if errors.Is(err, quota.ErrCostExceedsLimit) && d.local {
		return r.refused(scope, "", RedisDown, 0, "")
	}
	if errors.Is(err, quota.ErrRedis) || errors.Is(err, quota.ErrFormat) {
		return err
	}
	if ce, ok := err.(*quota.CostError); ok {
		shown := *ce
		shown.Limit = d.configured(ce.Limit)
		err = &shown
	}
	return fmt.Errorf("tollgate: endpoint %q: %w", r.endpoint.Name, err)
}

// refusal is the *QuotaError of a reservation that was not admitted. A
// pause's reads whose pause it is, and why (one round trip, on refusals by
// a pause only); one that cannot be read is an operator's.
func (p *decision) refusal(ctx context.Context, d *decider, r *request, scope string, res *quota.Reservation) *QuotaError {
	con, ok := res.Constraint()
	if !ok {
		return r.refused(scope, "", noRoom(d), res.RetryAfter(), "")
	}
	cause, reason := noRoom(d), ""
	if con.Paused {
		cause = PausedByOperator
		if pz, err := d.lim.PauseOf(ctx, scope, con.Bucket); err == nil && !pz.Until.IsZero() {
			cause, reason = pauseCause(pz), pz.Reason
		}
	}
	return r.refused(scope, con.Bucket, cause, res.RetryAfter(), reason)
}

// sharedRefusal reports whether a refusal is one tenant's of a bucket with
// shares: another tenant may still be below its share, so it is not
// remembered for the scope's other requests.
func (p *decision) sharedRefusal(qe *QuotaError) bool {
	return !qe.Cause.Paused() && p.limits.buckets[qe.Bucket].Shares != nil
}
