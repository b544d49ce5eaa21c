package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// A Decision describes what the Transport decided for one request. It
// never holds a credential: Scope is the pool's name or a hash.
type Decision struct {
	// Endpoint is the endpoint's name, e.g. "search.list".
	Endpoint string
	// Scope is the pool the units were asked of, e.g. "project-a".
	Scope string
	// Route is the failover route that was admitted, by name; empty for
	// the request's own scope.
	Route string
	// Caller names who the request was made for, as its context said
	// (WithCaller), e.g. "php-cron"; empty when it said nothing.
	Caller string
	// Charges are the units asked of each bucket, e.g. [{pool 100}].
	Charges []costs.Charge
	// Admitted reports that the request may be sent (now, or after Waited).
	Admitted bool
	// Waited is how long the decision took, its wait for a turn included,
	// e.g. 1.5s.
	Waited time.Duration
	// At is the instant the units count from, on the limiter's clock (the
	// Redis server's), or for units spent from a lease the local instant
	// they were spent: the request is sent at it or just after (a reserved
	// one within Transit, or it is decided again). Zero when nothing was
	// reserved (refused, or sent unmetered).
	At time.Time
	// RetryAfter is, for a refusal, how long until the units fit, e.g. 41s.
	RetryAfter time.Duration
	// Local reports a decision made while Redis was down, by the FailLocal
	// mode's in-process limiter.
	Local bool
	// Unmetered reports a request sent with no decision at all: Redis was
	// down and the endpoint fails open. Its units are recorded in Redis
	// when it answers again.
	Unmetered bool
	// Free reports a free request (costs.Rule.Free): nothing was reserved,
	// and Redis was not asked.
	Free bool
	// Cached reports a refusal made in this process without asking Redis,
	// because Redis had refused as much until RetryAfter (Refuse).
	Cached bool
	// Leased reports units spent from this process's lease (see
	// Config.Lease), without a round trip.
	Leased bool
	// Settled reports, to OnSettle, the request's true cost read from its
	// response: Charges are then what it counts now.
	Settled bool
	// Estimate is, for OnSettle, the charges the request was admitted
	// with, e.g. [{tokens 1000}] for a call that Charges now count at
	// [{tokens 220}].
	Estimate []costs.Charge
	// Err is why the request was not sent, when it was not: a *QuotaError,
	// an *UnavailableError while Redis is down and the endpoint fails
	// closed, the context's error, or the error of a request that reached
	// Base later than Transit after each of its admissions (see RoundTrip).
	Err error
}

// A DecisionHook is called with a request's Decision: as OnDecision, once
// per request, after the decision and any wait, before the request is sent
// (or instead, when it is not), and again for each new decision of a
// request decided again (it reached Base later than Transit after its
// admission); as OnWait, when it starts to wait; as OnWaitEnd, when that
// wait ends. It runs on the request's goroutine: keep
// it quick, and safe for concurrent use.
type DecisionHook func(ctx context.Context, d Decision)

// A SlotHook is called when a request takes a slot of a bucket's cap on
// requests in flight (Bucket.MaxInFlight), held true, and when it gives the
// slot back, held false: once each per slot, so that the slots a process
// holds are the takes less the gives. It runs on the goroutine that took
// or gave the slot (the request's, its body reader's, or Close's): keep
// it quick, and safe for concurrent use.
type SlotHook func(scope, bucket string, held bool)

// An UpstreamPause reports that the upstream answered a request that its
// quota is spent, so that every worker holds off: never a credential;
// Scope is a pool's name or a hash.
type UpstreamPause struct {
	// Endpoint is the request's endpoint, e.g. "search.list".
	Endpoint string
	// Scope is the pool paused, e.g. "project-a".
	Scope string
	// Buckets are the buckets paused; none means the whole scope.
	Buckets []string
	// For is how long every worker holds off, e.g. 10s.
	For time.Duration
	// Reason is the upstream's reason (Verdict.Reason), e.g.
	// "quotaExceeded", or else the response's status code, e.g. "429".
	Reason string
}

// A PauseHook is called when the upstream's answer to a request paused
// its scope or buckets, on the request's goroutine. Keep it quick, and
// safe for concurrent use.
type PauseHook func(ctx context.Context, p UpstreamPause)

// A Switch reports that the Transport's view of Redis changed.
type Switch struct {
	// Up is true when Redis answers again and decisions return to it,
	// false when it failed and endpoints fall back on their outage mode.
	Up bool
	// Err is the failure, when Up is false.
	Err error
}

// A SwitchHook is called on every switch between Redis and the outage
// modes, on the goroutine of the request that noticed it.
type SwitchHook func(s Switch)

// report calls the decision hook and logs the decision.
func (t *Transport) report(ctx context.Context, c *call, o outcome, err error) {
	d := Decision{
		Endpoint:  c.endpoint.Name,
		Scope:     o.scope(c),
		Caller:    CallerOf(ctx),
		Charges:   c.endpoint.Charges,
		Admitted:  err == nil,
		Waited:    o.waited,
		Local:     o.by != nil && o.by.local,
		Unmetered: o.open,
		Free:      o.free,
		Cached:    o.cached,
		Err:       err,
	}
	if o.route != nil {
		d.Route = o.route.Name
	}
	if o.res != nil && err == nil {
		d.At = o.res.Time()
	}
	if o.lease != nil && err == nil {
		d.Leased, d.At = true, o.spent
	}
	var qe *QuotaError
	if errors.As(err, &qe) {
		d.RetryAfter = qe.RetryAfter
	}
	if t.cfg.OnDecision != nil {
		t.cfg.OnDecision(ctx, d)
	}
	if t.cfg.Logger == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("endpoint", d.Endpoint), slog.String("scope", d.Scope),
		slog.Int64("units", c.endpoint.Units()),
	}
	switch {
	case d.Local:
		attrs = append(attrs, slog.Bool("local", true))
	case d.Unmetered:
		attrs = append(attrs, slog.Bool("unmetered", true))
	}
	switch {
	case err == nil:
		attrs = append(attrs, slog.Duration("waited", d.Waited))
		if d.Route != "" {
			attrs = append(attrs, slog.String("route", d.Route))
		}
		t.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "tollgate: admitted", attrs...)
	case qe != nil:
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
		t.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: refused", attrs...)
	default:
		attrs = append(attrs, slog.Any("err", err))
		t.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: not sent", attrs...)
	}
}

// waiting calls the wait hook for a request about to sleep until r is due.
func (t *Transport) waiting(ctx context.Context, c *call, r *quota.Reservation) {
	if t.cfg.OnWait != nil {
		t.cfg.OnWait(ctx, Decision{Endpoint: c.endpoint.Name, Scope: c.scope, Caller: CallerOf(ctx), Charges: c.endpoint.Charges, Admitted: true, At: r.Time()})
	}
}

// waitEnded calls the wait-end hook for a request whose wait for r, begun
// at start, ended: its turn came (err nil), or it did not.
func (t *Transport) waitEnded(ctx context.Context, c *call, r *quota.Reservation, start time.Time, err error) {
	if t.cfg.OnWaitEnd != nil {
		t.cfg.OnWaitEnd(ctx, Decision{Endpoint: c.endpoint.Name, Scope: c.scope, Caller: CallerOf(ctx), Charges: c.endpoint.Charges,
			Admitted: err == nil, Waited: t.now().Sub(start), At: r.Time(), Err: err})
	}
}

// log writes a record when a Logger is set.
func (t *Transport) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if t.cfg.Logger != nil {
		t.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
	}
}
