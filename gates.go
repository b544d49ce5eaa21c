package tollgate

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/internal/caps"
	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota"
)

// The gates of a scope. Before its units, a request takes, in the scope it
// spends, the gate of each bucket it charges whose limit is still to be
// learned (one request at a time until announced; internal/learn), then a
// slot of each capped bucket (Bucket.MaxInFlight; internal/caps), so that
// it is sent as soon as its units are decided. Each gate taken is held by
// the request (request.gates, request.slots, then its units, request.res)
// and given back by release, in the reverse order, in one place: the
// gates once the response's headers are read, the slots once its body
// ends, everything when the request is not sent.

// gates takes and gives back the gates and slots of requests, and keeps
// those held, to give them back when the Transport closes.
type gates struct {
	limits *limits
	held   caps.Held
	hooks  *hooks
}

// learning takes the gates of the buckets the request charges whose limit
// is still to be learned in scope, waiting up to maxWait for them (0: only
// if free now; negative: no bound but ctx's). It first reads what Redis
// holds of each bucket's newest announcement, which another process may
// have recorded; when that tells the limit, no gate is taken.
func (g *gates) learning(ctx context.Context, d *decider, r *request, scope string, maxWait time.Duration) error {
	var gates []*quota.Slot
	var buckets []string
	for _, ch := range r.endpoint.Charges {
		if _, gated := g.limits.of(d, scope, ch.Bucket, r.background); !gated {
			continue
		}
		s, err := g.learn(ctx, d, r, scope, ch.Bucket, maxWait)
		if err != nil {
			caps.Release(ctx, gates)
			if caps.Refused(err) {
				return r.refused(scope, ch.Bucket, CapFull, 0, "")
			}
			return limiterError(d, r, scope, err)
		}
		if s != nil {
			gates, buckets = append(gates, s), append(buckets, ch.Bucket)
		}
	}
	g.held.Add(gates, scope, buckets, true)
	r.held, r.gates = gates, uint16(len(gates)) // it held nothing before
	return nil
}

// learn takes the gate of one bucket, unless what Redis holds, read before
// and after the wait, tells its limit.
func (g *gates) learn(ctx context.Context, d *decider, r *request, scope, bucket string, maxWait time.Duration) (*quota.Slot, error) {
	k := learn.Key{Scope: scope, Bucket: bucket}
	learned := func() bool {
		if a, ok, err := d.lim.LastAnnouncement(ctx, scope, bucket); err == nil && ok {
			g.limits.learned.Update(k, func(l *learn.Learned) { l.Adopt(a, quotapath.ResetTolerance(g.limits.windowOf(bucket, *l, a.Window))) })
		}
		_, gated := g.limits.of(d, scope, bucket, r.background)
		return !gated
	}
	if learned() {
		return nil, nil
	}
	slot, err := d.lim.TakeSlot(ctx, scope, learn.GateName(bucket), 1, maxWait)
	if err != nil {
		return nil, err
	}
	if _, gated := g.limits.of(d, scope, bucket, r.background); !gated || learned() {
		caps.Release(ctx, []*quota.Slot{slot}) // learned while it waited
		return nil, nil
	}
	return slot, nil
}

// slots takes a slot of every capped bucket the request charges in scope,
// waiting up to maxWait for them. When a slot is not free in time it
// returns a *QuotaError naming the bucket.
func (g *gates) slots(ctx context.Context, d *decider, r *request, scope string, maxWait time.Duration) error {
	var buckets []string
	for _, ch := range r.endpoint.Charges {
		if d.caps[ch.Bucket] > 0 {
			buckets = append(buckets, ch.Bucket)
		}
	}
	if len(buckets) == 0 {
		return nil
	}
	held := len(r.held)
	all, failed, err := caps.Take(ctx, d.lim, scope, buckets, d.caps, maxWait, r.held)
	if err != nil {
		if caps.Refused(err) {
			return r.refused(scope, failed, CapFull, 0, "")
		}
		return limiterError(d, r, scope, err)
	}
	g.held.Add(all[held:], scope, buckets, false)
	g.hooks.took(ctx, scope, buckets)
	r.held = all
	return nil
}

// release gives back what the request holds of what: its units (the
// reservation cancelled, as a call never made), then its slots, then its
// gates, the reverse of the order they were taken. This is the one place
// where a request gives anything back, whatever path it took. It returns
// the error of giving the units back; a slot that cannot be given back
// expires with its TTL.
func (g *gates) release(ctx context.Context, r *request, what holding) error {
	var err error
	if what&heldUnits != 0 && r.res != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = r.res.Cancel(cctx)
		cancel()
		r.res = nil
	}
	if slots := r.slots(); what&heldSlots != 0 && len(slots) > 0 {
		g.hooks.slots(ctx, g.held.Remove(slots), false)
		caps.Release(ctx, slots)
		r.held = r.held[:r.gates]
	}
	if gates := r.held[:r.gates]; what&heldGates != 0 && len(gates) > 0 {
		g.held.Remove(gates)
		caps.Release(ctx, gates)
		r.held, r.gates = r.held[r.gates:], 0
	}
	if len(r.held) == 0 {
		r.held = nil
	}
	return err
}

// releaseAll gives back every slot and gate still held: the Transport
// closes.
func (g *gates) releaseAll(ctx context.Context) error {
	owners, err := g.held.ReleaseAll(ctx)
	g.hooks.slots(ctx, owners, false)
	return err
}

// capped reports whether the request charges a bucket with a cap on d.
func (d *decider) capped(r *request) bool {
	for _, ch := range r.endpoint.Charges {
		if d.caps[ch.Bucket] > 0 {
			return true
		}
	}
	return false
}
