package tollgate

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A capped request's slots and units together. A request that charges
// units to a scope and a capped bucket (GitHub's) takes its slots in the
// decision's own round trip (quota.Limiter.ReserveCapped: both, or
// neither), and, when it settles, gives them back in the settlement's
// (request.Ended). Only when a slot is not free now, or callers wait for
// one, does it take its slots apart, waiting its turn (slotwait.go), then
// its units: the slots keep the arrival order of their waiters.

// errCapBusy reports that a capped request could not take its slots with
// its units: it takes them apart, waiting its turn.
var errCapBusy = errors.New("tollgate: a cap's slot is not free now")

// together reports whether the request takes its slots in scope with
// charges, its units there: it charges units and a capped bucket, and
// holds no slot yet.
func (d *decider) together(r *request, charges []quota.Demand) bool {
	return len(charges) > 0 && len(r.slots()) == 0 && d.capped(r)
}

// admit reserves charges in scope (maxWait as quota.Limiter.Reserve's) with
// a slot of every capped bucket the request charges, in one round trip,
// and holds the slots with the request when the units are admitted.
// full names the capped bucket that had no slot free now, when one had
// none: then nothing was taken. err is the limiter's.
func (g *gates) admit(ctx context.Context, d *decider, r *request, scope string, maxWait time.Duration, charges []quota.Demand) (res *quota.Reservation, full string, err error) {
	var buckets []string
	for _, ch := range r.endpoint.Charges {
		if d.caps[ch.Bucket] > 0 && !slices.Contains(buckets, ch.Bucket) {
			buckets = append(buckets, ch.Bucket)
		}
	}
	slices.Sort(buckets)
	caps := make([]quota.Cap, len(buckets))
	for i, b := range buckets {
		caps[i] = quota.Cap{Bucket: b, N: d.caps[b]}
	}
	res, slots, err := d.lim.ReserveCapped(ctx, scope, maxWait, caps, charges...)
	var re *quota.RefusedError
	if errors.As(err, &re) && re.Bucket != "" {
		return nil, re.Bucket, nil
	}
	if err != nil || len(slots) == 0 {
		return res, "", err
	}
	g.held.Add(slots, scope, buckets, false)
	g.hooks.took(ctx, scope, buckets)
	r.held = append(r.held, slots...)
	return res, "", nil
}

// reserveUnits reserves the request's units in its scope, maxWait as
// quota.Limiter.Reserve's. together, it takes the request's slots in the
// same round trip (admit), or, when one is not free now, nothing, and
// returns errCapBusy: the request then takes its slots apart, waiting its
// turn (slotwait.go). err is otherwise the limiter's.
func (p *decision) reserveUnits(ctx context.Context, d *decider, r *request, maxWait time.Duration, charges []quota.Demand, together bool) (*quota.Reservation, error) {
	if !together {
		return d.lim.Reserve(ctx, r.scope, maxWait, charges...)
	}
	res, full, err := p.gates.admit(ctx, d, r, r.scope, maxWait, charges)
	if full != "" {
		return nil, errCapBusy
	}
	return res, err
}
