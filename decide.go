package tollgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// A decider is a limiter with the limits it enforces: the shared one in
// Redis, or the FailLocal mode's in-process one, holding a share of them.
type decider struct {
	lim        *quota.Limiter
	limits     map[string][]quota.Limit // for interactive requests
	background map[string][]quota.Limit // the share background requests may spend
	caps       map[string]int           // requests in flight, per bucket that has a cap
	local      bool                     // the FailLocal mode's: its refusals say nothing of Redis
}

// limitsFor returns the limits d enforces for the call's priority (for
// no call, the interactive ones).
func (d *decider) limitsFor(c *call) map[string][]quota.Limit {
	if c != nil && c.background {
		return d.background
	}
	return d.limits
}

// outcome is what a decision admitted.
type outcome struct {
	res    *quota.Reservation // the units reserved; nil when unmetered, leased or free
	at     time.Time          // with res: the local instant its units count from
	slots  []*quota.Slot      // the slots of capped buckets, held until the response ends
	gates  []*quota.Slot      // the gates of buckets still learning their limit, held until the response's headers are read
	lease  *quota.Lease       // the lease the units came from, if any
	spent  time.Time          // when they were taken from it
	by     *decider           // who decided; nil when nobody did
	route  *Route             // the failover route admitted, if any
	open   bool               // sent unmetered: Redis was down, the endpoint fails open
	free   bool               // a free request: nothing to decide
	cached bool               // refused from the known-exhausted cache
	waited time.Duration
}

// scope is the pool the outcome spends from.
func (o outcome) scope(c *call) string {
	if o.route != nil && o.route.Scope != "" {
		return o.route.Scope
	}
	return c.scope
}

// decide asks Redis for the request's units as its policy says, and falls
// back on the policy's outage mode when Redis cannot answer. A lease in
// hand is spent first, even while Redis is down: its units are counted
// there already.
func (t *Transport) decide(ctx context.Context, c *call) (outcome, error) {
	if c.background {
		ctx = quota.WithPriority(ctx, quota.Background)
	}
	if c.endpoint.Free {
		o, err := t.admitFree(c)
		if err != nil || !t.capped(c) {
			return o, err
		}
	}
	if o, ok := t.spendLease(c); ok {
		return o, nil
	}
	if t.askRedis(ctx, c.scope) {
		o, ok, err := t.renewLease(ctx, c)
		if ok {
			t.describe(ctx, c, o.scope(c))
			return o, nil
		}
		if err == nil {
			o, err = t.apply(ctx, &t.redis, c)
		}
		if err == nil || isQuotaError(err) {
			t.describe(ctx, c, o.scope(c))
		}
		if !errors.Is(err, quota.ErrRedis) {
			return o, err
		}
		t.redisFailed(ctx, err)
	}
	return t.fallback(ctx, c)
}

// admitFree lets a free request through without asking Redis: it spends
// nothing. It honours the pauses this process knows of (an upstream that
// said stop means stop), unless it continues a session already paid for,
// which stopping would waste.
func (t *Transport) admitFree(c *call) (outcome, error) {
	o := outcome{free: true}
	if c.endpoint.Continues {
		return o, nil
	}
	if qe, ok := t.exhausted.check(c.scope, c.endpoint, t.now()); ok && qe.Cause.Paused() {
		o.cached = true
		return o, qe
	}
	return o, nil
}

// fallback decides while Redis is down, as the endpoint's outage mode says.
func (t *Transport) fallback(ctx context.Context, c *call) (outcome, error) {
	switch c.policy.OnOutage {
	case FailOpen:
		t.ledger.add(c.scope, c.endpoint.Charges)
		return outcome{open: true}, nil
	case FailLocal:
		o, err := t.apply(ctx, t.local, c)
		if err == nil && o.res != nil {
			t.ledger.add(o.scope(c), c.endpoint.Charges)
		}
		return o, err
	default:
		return outcome{}, &UnavailableError{Endpoint: c.endpoint.Name, Scope: c.scope, Err: t.probe.lastErr()}
	}
}

// apply runs the request's policy on one decider.
func (t *Transport) apply(ctx context.Context, d *decider, c *call) (outcome, error) {
	o := outcome{by: d, free: c.endpoint.Free}
	if c.policy.OnRefusal == Refuse && !d.local && !c.background {
		if qe, ok := t.exhausted.check(c.scope, c.endpoint, t.now()); ok {
			o.cached = true
			return o, qe
		}
	}
	switch c.policy.OnRefusal {
	case Refuse:
		return t.admitNow(ctx, d, c, c.scope, o)
	case Failover:
		o, err := t.admitNow(ctx, d, c, c.scope, o)
		var first *QuotaError
		if !errors.As(err, &first) {
			return o, err
		}
		best := first
		for i := range t.cfg.Routes {
			r := &t.cfg.Routes[i]
			o.route = r
			if r.Scope == "" {
				return o, nil // unmetered: a cache, say
			}
			o, err = t.admitNow(ctx, d, c, r.Scope, o)
			var qe *QuotaError
			if !errors.As(err, &qe) {
				return o, err
			}
			if qe.RetryAfter < best.RetryAfter {
				best = qe
			}
		}
		o.route = nil
		if c.policy.AfterFailover == WaitTurn {
			return t.waitTurn(ctx, d, c, o)
		}
		return o, best
	default:
		return t.waitTurn(ctx, d, c, o)
	}
}

// admitNow asks for the slots and units in scope and fails with a
// *QuotaError when they are not free now.
func (t *Transport) admitNow(ctx context.Context, d *decider, c *call, scope string, o outcome) (outcome, error) {
	gates, err := t.gates(ctx, d, c, scope, 0)
	if err != nil {
		return o, err
	}
	slots, err := t.takeSlots(ctx, d, c, scope, 0)
	if err != nil {
		t.releaseSlots(ctx, gates)
		return o, err
	}
	charges := t.charges(d, c, scope)
	if len(charges) == 0 { // a free request, held by its slots alone
		o.slots, o.gates = slots, gates
		return o, nil
	}
	epoch := t.exhausted.mark()
	r, err := d.lim.Allow(ctx, scope, charges...)
	if err != nil {
		t.releaseSlots(ctx, append(slots, gates...))
		return o, limiterError(d, c, scope, err)
	}
	if !r.OK() {
		t.releaseSlots(ctx, append(slots, gates...))
		qe := t.refusal(ctx, d, c, scope, r)
		if !d.local && !c.background && (qe.Bucket != "" || qe.Cause.Paused()) && qe.RetryAfter > 0 {
			t.exhausted.noteSince(epoch, scope, qe.Bucket, qe.Units, qe.Cause, qe.Reason, t.now().Add(qe.RetryAfter), t.now())
		}
		return o, qe
	}
	o.res, o.slots, o.gates, o.at = r, slots, gates, time.Now()
	return o, nil
}

// gates takes the gates of the buckets the call charges whose limit is
// still to be learned in scope (one request at a time until announced).
func (t *Transport) gates(ctx context.Context, d *decider, c *call, scope string, maxWait time.Duration) ([]*quota.Slot, error) {
	var gates []*quota.Slot
	for _, ch := range c.endpoint.Charges {
		if _, gated := t.announcedLimits(d, c, scope, ch.Bucket); !gated {
			continue
		}
		g, err := t.learning(ctx, d, c, scope, ch.Bucket, maxWait)
		if err != nil {
			t.releaseSlots(ctx, gates)
			if errors.Is(err, quota.ErrRefused) {
				return nil, &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Bucket: ch.Bucket, Cause: CapFull}
			}
			return nil, limiterError(d, c, scope, err)
		}
		if g != nil {
			gates = append(gates, g)
		}
	}
	t.held.add(gates, scope, nil)
	return gates, nil
}

// charges turns the call's charges into the limiter's, with each bucket's
// limits for the call's priority and scope (what announcements taught
// included); a limit still to be learned is left out, and so are the
// zero-unit charges of a free request, which only name buckets for their
// caps.
func (t *Transport) charges(d *decider, c *call, scope string) []quota.Charge {
	if c.endpoint.Free {
		return nil
	}
	out := make([]quota.Charge, 0, len(c.endpoint.Charges))
	for _, ch := range c.endpoint.Charges {
		limits := d.limitsFor(c)[ch.Bucket]
		if t.announced != nil {
			limits, _ = t.announcedLimits(d, c, scope, ch.Bucket)
			if len(limits) == 0 {
				continue // nothing known to check: its gate holds it to one at a time
			}
		}
		out = append(out, quota.Charge{Bucket: ch.Bucket, Units: ch.Units, Limits: limits})
	}
	return out
}

// waitTurn waits for the request's gates and slots, then takes a hold in
// its own scope and sleeps until it is due. Its waits end within the
// policy's MaxWait and the context's deadline: a slot or hold that would
// come later is refused (or given back) at once. The decisions' own round
// trips are bounded by the context alone: a request with room now is
// admitted however short its MaxWait.
func (t *Transport) waitTurn(ctx context.Context, d *decider, c *call, o outcome) (outcome, error) {
	wctx := ctx
	if limit := c.policy.waitLimit(); limit >= 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	maxWait := func() time.Duration { // 0: only what is free now
		if deadline, bounded := wctx.Deadline(); bounded {
			return max(time.Until(deadline), 0)
		}
		return -1
	}
	refused := func(err error) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Cause: CapFull}
		}
		return err
	}
	for redecided, paused := 0, 0; ; {
		gates, err := t.gates(ctx, d, c, c.scope, maxWait())
		if err != nil {
			return o, refused(err)
		}
		slots, waited, err := t.waitSlots(ctx, wctx, d, c, maxWait())
		if err == nil && waited != nil && !t.hasCharges(c) {
			if pw := t.pauseAfterWait(ctx, c, *waited); pw != nil {
				t.releaseSlots(ctx, slots)
				err = pw
			}
		}
		if err != nil {
			t.releaseSlots(ctx, gates)
			if pw := pausedBy(err); pw != nil {
				if paused == maxPauses {
					return o, pw.refusal(c)
				}
				if err := t.sitOut(wctx, c, pw); err != nil {
					return o, err
				}
				paused++
				continue
			}
			return o, refused(err)
		}
		o.slots, o.gates = slots, gates
		charges := t.charges(d, c, c.scope)
		if len(charges) == 0 {
			return o, nil
		}
		learned := t.learnedGen(c)
		o, err = t.waitUnits(ctx, wctx, d, c, charges, o)
		if err != nil {
			t.releaseSlots(ctx, append(slots, gates...))
			o.slots, o.gates = nil, nil
			if pw := pausedBy(err); pw != nil {
				// A pause reached the hold: it was given back, and the
				// request decides again, as one arriving now would.
				if paused < maxPauses {
					if err := t.sitOut(wctx, c, pw); err != nil {
						return o, err
					}
					paused++
					continue
				}
				err = pw.refusal(c)
			}
			if errors.Is(err, errRedecide) && redecided < maxRedecisions {
				redecided++
				continue
			}
			if errors.Is(err, errRedecide) {
				err = &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Units: c.endpoint.Units(), Cause: noRoom(d)}
			}
			return o, err
		}
		if redecided == maxRedecisions || !t.outdated(c, learned) {
			return o, nil
		}
		redecided++
		// An announcement changed the bucket's limit or window while the
		// hold waited: decide again, under what it said.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = o.res.Cancel(cctx)
		cancel()
		t.releaseSlots(ctx, append(slots, gates...))
		o.res, o.slots, o.gates = nil, nil, nil
	}
}

// maxRedecisions bounds how often a waiting request is decided again
// because announcements kept changing its buckets' limits; maxPauses, how
// often because pauses reached it.
const (
	maxRedecisions = 4
	maxPauses      = 8
)

// noRoom is the cause of a refusal by d's count.
func noRoom(d *decider) Cause {
	if d.local {
		return RedisDown
	}
	return NoRoom
}

// hasCharges reports whether the call spends units (a free request, held
// by its slots alone, does not).
func (t *Transport) hasCharges(c *call) bool {
	return !c.endpoint.Free && len(c.endpoint.Charges) > 0
}

// waitSlots takes the call's slots, now if they are free; otherwise it
// waits for them, where pauses reach it (waiters.go), up to maxWait. When
// it waited, waited holds what the Transport heard before (for
// pauseAfterWait); a pause that reached it is returned as its error.
func (t *Transport) waitSlots(ctx, wctx context.Context, d *decider, c *call, maxWait time.Duration) (slots []*quota.Slot, waited *uint64, err error) {
	slots, err = t.takeSlots(ctx, d, c, c.scope, 0) // on ctx: the round trip is not the wait
	if err == nil {
		return slots, nil, nil
	}
	if qe, ok := err.(*QuotaError); !ok || qe.Cause != CapFull {
		return nil, nil, err
	}
	heard := t.listening.heard()
	sctx, stop := context.WithCancelCause(wctx)
	defer stop(nil)
	var w *waiter
	if !d.local {
		w = &waiter{scope: c.scope, buckets: bucketsOf(c), stop: stop}
		t.waiters.add(w)
		t.listen(ctx)
		defer t.unlisten()
	}
	slots, err = t.takeSlots(sctx, d, c, c.scope, maxWait)
	if w != nil && !t.waiters.remove(w) {
		<-sctx.Done() // a pause took the waiter, and is about to stop it
	}
	if pw := pausedBy(context.Cause(sctx)); pw != nil {
		t.releaseSlots(ctx, slots)
		return nil, nil, pw
	}
	return slots, &heard, err
}

// pausedBy returns the pause that ended a wait with err, or nil.
func pausedBy(err error) *pausedWait {
	pw, _ := err.(*pausedWait)
	return pw
}

// bucketsOf returns the buckets the call charges.
func bucketsOf(c *call) []string {
	out := make([]string, len(c.endpoint.Charges))
	for i, ch := range c.endpoint.Charges {
		out[i] = ch.Bucket
	}
	return out
}

// waitUnits takes a hold for the request's units and sleeps until it is
// due, within wctx's deadline.
func (t *Transport) waitUnits(ctx, wctx context.Context, d *decider, c *call, charges []quota.Charge, o outcome) (outcome, error) {
	maxWait := time.Duration(-1)
	deadline, bounded := wctx.Deadline()
	if bounded {
		maxWait = max(time.Until(deadline), 0)
	}
	heard := t.listening.heard()
	// On ctx: MaxWait bounds the wait for a turn, not the decision's round trip.
	r, err := d.lim.Reserve(ctx, c.scope, maxWait, charges...)
	if err != nil {
		return o, limiterError(d, c, c.scope, err)
	}
	if !r.OK() {
		return o, t.refusal(ctx, d, c, c.scope, r)
	}
	o.res, o.at = r, time.Now().Add(r.Delay())
	if bounded && o.at.After(deadline) && (r.Delay() > 0 || ctx.Err() != nil) {
		// The round trip ate the time the hold needed: give it back now
		// rather than sleep until the deadline to fail.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.Cancel(cctx)
		o.res = nil
		if err := ctx.Err(); err != nil {
			return o, err
		}
		return o, &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Units: c.endpoint.Units(), RetryAfter: r.Delay(), Cause: noRoom(d)}
	}
	waits := r.Delay() > 0
	start := t.now()
	if waits {
		t.waiting(ctx, c, r)
	}
	hctx := wctx
	var w *waiter // registered for pauses to reach
	if waits {
		var stop context.CancelCauseFunc
		hctx, stop = context.WithCancelCause(wctx)
		defer stop(nil)
		if !d.local { // while Redis is down, nobody can tell a pause
			w = &waiter{scope: c.scope, buckets: bucketsOf(c), hold: r, stop: stop}
			t.waiters.add(w)
			t.listen(ctx)
			defer t.unlisten()
		}
		if keys := t.announcedKeys(c); len(keys) > 0 {
			t.holds.add(keys, r, stop)
			defer t.holds.remove(keys, r)
		}
	}
	err = r.Wait(hctx)
	if w != nil && !t.waiters.remove(w) {
		// A pause took the waiter as its turn came: its hold is being
		// given back, and it is about to be stopped.
		<-hctx.Done()
		err = context.Cause(hctx)
	}
	if err == nil && waits && !d.local {
		if pw := t.pauseAfterWait(ctx, c, heard); pw != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = r.Cancel(cctx)
			cancel()
			err = pw
		}
	}
	if err != nil {
		o.res = nil // the hold was given back
		switch pw := pausedBy(context.Cause(hctx)); {
		case errors.Is(context.Cause(hctx), errRedecide):
			err = errRedecide
		case pw != nil:
			err = pw
		case pausedBy(err) != nil:
		case ctx.Err() == nil:
			err = &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Units: c.endpoint.Units(), RetryAfter: time.Until(deadline), Cause: noRoom(d)}
		}
	}
	if waits {
		t.waitEnded(ctx, c, r, start, err)
	}
	return o, err
}

// limiterError turns a limiter's error into the Transport's: a Redis failure
// stays as it is (decide falls back on it), and so does state of another
// Redis format; units no limit can ever hold are a configuration problem,
// or, on the local limiter whose limits are a share, a refusal.
func limiterError(d *decider, c *call, scope string, err error) error {
	if errors.Is(err, quota.ErrCostExceedsLimit) && d.local {
		return &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Units: c.endpoint.Units(), Cause: RedisDown}
	}
	if errors.Is(err, quota.ErrRedis) || errors.Is(err, quota.ErrFormat) {
		return err
	}
	return fmt.Errorf("tollgate: endpoint %q: %w", c.endpoint.Name, err)
}

// refusal builds the *QuotaError for a reservation that was not admitted.
// A pause's refusal reads whose pause it is, and why (one round trip, on
// refusals by a pause only); one that cannot be read is an operator's.
func (t *Transport) refusal(ctx context.Context, d *decider, c *call, scope string, r *quota.Reservation) *QuotaError {
	qe := &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Units: c.endpoint.Units(), RetryAfter: r.RetryAfter(), Cause: noRoom(d)}
	if con, ok := r.Constraint(); ok {
		qe.Bucket = con.Bucket
		if con.Bucket != "" {
			qe.Units = unitsOf(c.endpoint, con.Bucket)
		}
		if con.Paused {
			qe.Cause = PausedByOperator
			if p, err := d.lim.PauseOf(ctx, scope, con.Bucket); err == nil && !p.Until.IsZero() {
				qe.Cause, qe.Reason = pauseCause(p), p.Reason
			}
		}
	}
	return qe
}

// unitsOf returns the units an endpoint charges to bucket.
func unitsOf(e costs.Endpoint, bucket string) int64 {
	for _, ch := range e.Charges {
		if ch.Bucket == bucket {
			return ch.Units
		}
	}
	return 0
}
