package tollgate

import (
	"context"
	"log/slog"

	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/internal/outage"
	"github.com/tollgate/tollgate/quota"
)

// outages is the stage that tells whether to ask Redis (internal/outage's
// probe), and the outage modes that decide while Redis does not answer:
// nothing sent (FailClosed), sent unmetered (FailOpen), or decided on the
// in-process limiter (FailLocal); what was spent meanwhile is recorded in
// Redis when it answers again (internal/outage's ledger).
type outages struct {
	probe     outage.Probe
	ledger    outage.Ledger
	redis     *decider
	local     *decider // nil without FailLocal
	decision  *decision
	listening *notices.Listening
	hooks     *hooks
}

// ask reports whether this request should ask Redis: always while it is
// up; while it is down, only the request that wins the next probe, and
// only when its PING of the node holding the scope succeeds, which
// switches back to Redis and records there what was spent meanwhile.
func (o *outages) ask(ctx context.Context, r *request) bool {
	if !o.probe.Down() {
		return true
	}
	if !o.probe.Due(r.now) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, outage.ProbeTimeout)
	defer cancel()
	if err := o.redis.lim.Ping(pctx, r.scope); err != nil {
		return false
	}
	if o.probe.Up() {
		o.hooks.switched(ctx, Switch{Up: true})
		o.ledger.Settle(ctx, o.record, func(scope, bucket string, err error) {
			o.hooks.log(ctx, slog.LevelWarn, "tollgate: could not record units spent during the outage",
				slog.String("scope", scope), slog.String("bucket", bucket), slog.Any("err", err))
		})
	}
	return true
}

// record writes units spent during the outage to Redis. A bucket's debt is
// capped at its smallest limit: beyond that the window is full either way.
// A limit still to be learned has nothing to record it in.
func (o *outages) record(ctx context.Context, scope, bucket string, units int64) (int64, error) {
	limits := usable(o.redis.limits[bucket])
	if len(limits) == 0 {
		return 0, nil
	}
	for _, lim := range limits {
		units = min(units, lim.Units)
	}
	return units, o.redis.lim.Record(ctx, scope, quota.Demand{Bucket: bucket, Units: units, Limits: limits})
}

// failed switches to the outage modes after a Redis failure.
func (o *outages) failed(ctx context.Context, r *request, err error) {
	if o.probe.Fail(err, r.now) {
		o.listening.Deafen()
		o.hooks.switched(ctx, Switch{Up: false, Err: err})
	}
}

// admit decides while Redis is down, as the endpoint's outage mode says.
func (o *outages) admit(ctx context.Context, r *request) error {
	switch r.policy.OnOutage {
	case FailOpen:
		o.ledger.Add(r.scope, r.endpoint.Charges)
		r.forget()
		r.kind = unmetered
		return nil
	case FailLocal:
		r.forget()
		err := o.decision.apply(ctx, o.local, r)
		if err == nil && (r.res != nil || r.shadowed) {
			o.ledger.Add(r.spending(), r.endpoint.Charges)
		}
		return err
	default:
		r.forget()
		return &UnavailableError{Endpoint: r.endpoint.Name, Scope: r.scope, Err: o.probe.LastErr()}
	}
}
