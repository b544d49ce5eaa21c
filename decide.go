package tollgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// outcome is what a decision admitted.
type outcome struct {
	res     *quota.Reservation // the units reserved; nil when unmetered or leased
	lease   *quota.Lease       // the lease the units came from, if any
	spent   time.Time          // when they were taken from it
	limiter *quota.Limiter     // who decided: Redis or the local limiter; nil when nobody did
	route   *Route             // the failover route admitted, if any
	mode    Mode
	waited  time.Duration
}

// scope is the pool the outcome spends from.
func (o outcome) scope(c *call) string {
	if o.route != nil && o.route.Scope != "" {
		return o.route.Scope
	}
	return c.scope
}

// decide asks Redis for the request's units as its policy says, and falls
// back on the policy's outage mode when Redis cannot answer.
// A lease in hand is spent first, even while Redis is down: its units are
// counted there already.
func (t *Transport) decide(ctx context.Context, st *state, c *call) (outcome, error) {
	if o, ok := t.spendLease(st, c); ok {
		o.limiter = t.Limiter
		return o, nil
	}
	if st.health.useRedis(ctx, t, st, c.scope) {
		o, ok, err := t.renewLease(ctx, st, c)
		if ok {
			o.limiter = t.Limiter
			return o, nil
		}
		if err == nil {
			o, err = t.apply(ctx, t.Limiter, st.limits, c)
			o.mode = ModeRedis
		}
		if !errors.Is(err, quota.ErrRedis) {
			return o, err
		}
		st.health.markDown(ctx, t, err)
	}
	return t.fallback(ctx, st, c)
}

// fallback decides while Redis is down.
func (t *Transport) fallback(ctx context.Context, st *state, c *call) (outcome, error) {
	switch c.policy.OnOutage {
	case FailOpen:
		st.health.addDebt(c.scope, c.endpoint.Charges)
		return outcome{mode: ModeOpen}, nil
	case Local:
		if st.local == nil {
			return outcome{mode: ModeClosed}, configErrorf("endpoint %q uses the Local outage mode, but Transport.LocalShare is not set", c.endpoint.Name)
		}
		lim, err := st.health.localLimiter()
		if err != nil {
			return outcome{mode: ModeClosed}, &UnavailableError{Endpoint: c.endpoint.Name, Scope: c.scope, Err: err}
		}
		o, err := t.apply(ctx, lim, st.local, c)
		o.mode = ModeLocal
		if err == nil && o.res != nil {
			st.health.addDebt(o.scope(c), c.endpoint.Charges)
		}
		return o, err
	default:
		return outcome{mode: ModeClosed}, &UnavailableError{Endpoint: c.endpoint.Name, Scope: c.scope, Err: st.health.lastErr()}
	}
}

// apply runs the request's policy on one limiter with one set of limits.
func (t *Transport) apply(ctx context.Context, lim *quota.Limiter, limits map[string][]quota.Limit, c *call) (outcome, error) {
	o := outcome{limiter: lim}
	if c.policy.OnRefusal == Error && lim == t.Limiter {
		if qe, ok := t.st.exhausted.check(c.scope, c.endpoint, time.Now()); ok {
			qe.cached = true
			return o, qe
		}
	}
	charges := quotaCharges(c.endpoint, limits)
	switch c.policy.OnRefusal {
	case Error:
		return t.admitNow(ctx, lim, c, c.scope, charges, o)
	case Failover:
		o, err := t.admitNow(ctx, lim, c, c.scope, charges, o)
		var first *QuotaError
		if !errors.As(err, &first) {
			return o, err
		}
		best := first
		for i := range t.Routes {
			r := &t.Routes[i]
			o.route = r
			if r.Scope == "" {
				return o, nil // unmetered: a cache, say
			}
			o, err = t.admitNow(ctx, lim, c, r.Scope, charges, o)
			var qe *QuotaError
			if !errors.As(err, &qe) {
				return o, err
			}
			if qe.RetryAfter < best.RetryAfter {
				best = qe
			}
		}
		o.route = nil
		if c.policy.AfterFailover == Wait {
			return t.waitTurn(ctx, lim, c, charges, o)
		}
		return o, best
	default:
		return t.waitTurn(ctx, lim, c, charges, o)
	}
}

// admitNow asks for the units in scope and fails with a *QuotaError when
// they do not fit now.
func (t *Transport) admitNow(ctx context.Context, lim *quota.Limiter, c *call, scope string, charges []quota.Charge, o outcome) (outcome, error) {
	r, err := lim.Allow(ctx, scope, charges...)
	if err != nil {
		return o, t.limiterError(lim, c, scope, err)
	}
	if !r.OK() {
		qe := refusal(c, scope, r)
		if lim == t.Limiter && (qe.Bucket != "" || qe.Upstream) && qe.RetryAfter > 0 {
			t.st.exhausted.note(scope, qe.Bucket, qe.Cost, qe.Upstream, time.Now().Add(qe.RetryAfter))
		}
		return o, qe
	}
	o.res = r
	return o, nil
}

// waitTurn takes a hold in the request's own scope and sleeps until it is
// due. The whole of it, the Redis round trip included, ends within the
// policy's MaxWait and the context's deadline: a hold that would fall
// later is refused (or given back) at once.
func (t *Transport) waitTurn(ctx context.Context, lim *quota.Limiter, c *call, charges []quota.Charge, o outcome) (outcome, error) {
	wctx := ctx
	if limit := c.policy.waitLimit(); limit >= 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	maxWait := time.Duration(-1)
	deadline, bounded := wctx.Deadline()
	if bounded {
		maxWait = max(time.Until(deadline), 0)
	}
	r, err := lim.Reserve(wctx, c.scope, maxWait, charges...)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !callerDeadlinePassed(ctx) {
			// MaxWait passed before the limiter answered (a slow Redis).
			return o, &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Cost: c.endpoint.Units()}
		}
		return o, t.limiterError(lim, c, c.scope, err)
	}
	if !r.OK() {
		return o, refusal(c, c.scope, r)
	}
	o.res = r
	if due := time.Now().Add(r.Delay()); bounded && due.After(deadline) {
		// The round trip ate the time the hold needed: give it back now
		// rather than sleep until the deadline to fail.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.Cancel(cctx)
		if err := ctx.Err(); err != nil {
			return o, err
		}
		return o, &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Cost: c.endpoint.Units(), RetryAfter: r.Delay()}
	}
	if err := r.Wait(wctx); err != nil {
		if ctx.Err() == nil {
			return o, &QuotaError{Endpoint: c.endpoint.Name, Scope: c.scope, Cost: c.endpoint.Units(), RetryAfter: time.Until(deadline)}
		}
		return o, err
	}
	return o, nil
}

// callerDeadlinePassed reports whether the caller's own deadline is past,
// even if its context has not noticed yet.
func callerDeadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// limiterError turns a limiter's error into the Transport's: a Redis failure
// stays as it is (decide falls back on it), a cost no limit can ever hold
// is a configuration problem, or, on the local limiter whose limits are a
// share, a refusal.
func (t *Transport) limiterError(lim *quota.Limiter, c *call, scope string, err error) error {
	if errors.Is(err, quota.ErrCostExceedsLimit) && lim != t.Limiter {
		return &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Cost: c.endpoint.Units()}
	}
	if errors.Is(err, quota.ErrRedis) {
		return err
	}
	return fmt.Errorf("tollgate: endpoint %q: %w", c.endpoint.Name, err)
}

// refusal builds the *QuotaError for a reservation that was not admitted.
func refusal(c *call, scope string, r *quota.Reservation) *QuotaError {
	qe := &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Cost: c.endpoint.Units(), RetryAfter: r.RetryAfter()}
	if con, ok := r.Constraint(); ok {
		qe.Bucket, qe.Upstream = con.Bucket, con.Paused
		if con.Bucket != "" {
			qe.Cost = unitsOf(c.endpoint, con.Bucket)
		}
	}
	return qe
}

// quotaCharges turns an endpoint's charges into the limiter's, with the
// limits of each bucket.
func quotaCharges(e costs.Endpoint, limits map[string][]quota.Limit) []quota.Charge {
	out := make([]quota.Charge, len(e.Charges))
	for i, ch := range e.Charges {
		out[i] = quota.Charge{Bucket: ch.Bucket, Cost: ch.Units, Limits: limits[ch.Bucket]}
	}
	return out
}
