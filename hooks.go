package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/caps"
	"github.com/tollgate/tollgate/internal/spend"
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
	// Shadow reports a request the Shadow action sent although its
	// quota had no room: to Trace.WouldRefuse, whose Decision's Err is
	// the *QuotaError it would have had (Admitted stays true: it is
	// sent), and to Trace.Decided, whose Err stays nil.
	Shadow bool
	// Cached reports a refusal made in this process without asking Redis,
	// because Redis had refused as much until RetryAfter (Refuse).
	Cached bool
	// Leased reports units spent from this process's lease (see
	// Config.Lease), without a round trip.
	Leased bool
	// Settled reports, to Trace.Settled, the request's true cost read from its
	// response: Charges are then what it counts now.
	Settled bool
	// Estimate is, for Trace.Settled, the charges the request was admitted
	// with, e.g. [{tokens 1000}] for a call that Charges now count at
	// [{tokens 220}].
	Estimate []costs.Charge
	// Err is why the request was not sent, when it was not: a *QuotaError,
	// an *UnavailableError while Redis is down and the endpoint fails
	// closed, the context's error, or the error of a request that reached
	// Base later than Transit after each of its admissions (see RoundTrip).
	Err error
}

// A Switch reports that the Transport's view of Redis changed.
type Switch struct {
	// Up is true when Redis answers again and decisions return to it,
	// false when it failed and endpoints fall back on their outage mode.
	Up bool
	// Err is the failure, when Up is false.
	Err error
}

// hooks are the Config's Trace and Logger: every Trace function is called
// from here, and every Decision is built here (decisionOf).
type hooks struct {
	trace  Trace
	logger *slog.Logger
	spend  *spend.Recorder // what this process spends, for status (spending.go)
}

func hooksOf(cfg *Config) *hooks {
	return &hooks{trace: cfg.Trace, logger: cfg.Logger}
}

// A moment is when a Trace function of a Decision is called.
type moment uint8

const (
	decidedNow  moment = iota // Decided: the decision, after any wait
	waitStarts                // WaitStarted: a hold taken, the request about to sleep until its turn
	waitEnds                  // WaitEnded: that wait ended
	settledNow                // Settled: a response told the request's true cost
	wouldRefuse               // WouldRefuse: the Shadow action sends a request it would have refused
)

// detail is what a moment adds to the request's Decision.
type detail struct {
	err     error
	at      time.Time      // waitStarts, waitEnds: when the hold is due
	waited  time.Duration  // decidedNow, waitEnds: how long it took
	charges []costs.Charge // settledNow: what the request now counts
}

// decisionOf builds the Decision of the request at moment m: the one place a
// Decision is built.
func decisionOf(r *request, m moment, x detail) Decision {
	d := Decision{Endpoint: r.endpoint.Name, Scope: r.spending(), Caller: callerOf(r.req.Context()), Charges: r.endpoint.Charges, Admitted: x.err == nil, Err: x.err}
	switch m {
	case waitStarts, waitEnds:
		d.Waited, d.At = x.waited, x.at
	case settledNow:
		d.Charges, d.Estimate, d.At, d.Settled, d.Admitted = x.charges, r.endpoint.Charges, r.res.Time(), true, true
	case wouldRefuse:
		d.Admitted, d.Shadow = true, true
		var qe *QuotaError
		if errors.As(x.err, &qe) {
			d.RetryAfter = qe.RetryAfter
		}
	default:
		d.Shadow = r.shadowed
		d.Waited = x.waited
		d.Local = r.local()
		d.Unmetered = r.kind == unmetered
		d.Free = r.endpoint.Free && (r.kind == admitFree || r.kind == decided || r.kind == remembered)
		d.Cached = r.kind == remembered
		if r.route != nil {
			d.Route = r.route.Name
		}
		if r.res != nil && x.err == nil {
			d.At = r.res.Time()
		}
		if r.kind == fromLease && x.err == nil {
			d.Leased, d.At = true, r.at // the local instant it was spent
		}
		if x.err != nil { // only then: the error's target escapes
			var qe *QuotaError
			if errors.As(x.err, &qe) {
				d.RetryAfter = qe.RetryAfter
			}
		}
	}
	return d
}

// decided tells the Trace and the log of the request's decision,
// which took waited.
func (h *hooks) decided(ctx context.Context, r *request, waited time.Duration, err error) {
	if h.trace.Decided == nil && h.logger == nil {
		return
	}
	d := decisionOf(r, decidedNow, detail{err: err, waited: waited})
	if h.trace.Decided != nil {
		h.trace.Decided(ctx, d)
	}
	if h.logger == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("endpoint", d.Endpoint), slog.String("scope", d.Scope),
		slog.Int64("units", r.endpoint.Units()),
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
		h.logger.LogAttrs(ctx, slog.LevelDebug, "tollgate: admitted", attrs...)
	case isQuotaError(err):
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
		h.logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: refused", attrs...)
	default:
		attrs = append(attrs, slog.Any("err", err))
		h.logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: not sent", attrs...)
	}
}

// waits tells the Trace of a request whose hold is due later: at m
// waitStarts, and at waitEnds, with how long it waited and why it ended.
func (h *hooks) waits(ctx context.Context, r *request, m moment, x detail) {
	f := h.trace.WaitStarted
	if m == waitEnds {
		f = h.trace.WaitEnded
	}
	if f != nil {
		f(ctx, decisionOf(r, m, x))
	}
}

// wouldRefuse tells the Trace, and the count for status, of a request
// the Shadow action sends although it would have been refused, qe.
func (h *hooks) wouldRefuse(ctx context.Context, r *request, qe *QuotaError) {
	h.spend.Refuse(qe.Scope, qe.Bucket, r.endpoint.Name, callerOf(r.req.Context()), spend.WouldRefuse)
	if h.trace.WouldRefuse != nil {
		h.trace.WouldRefuse(ctx, decisionOf(r, wouldRefuse, detail{err: qe}))
	}
	h.log(ctx, slog.LevelInfo, "tollgate: would have refused (shadow); sent", slog.String("endpoint", r.endpoint.Name),
		slog.String("scope", qe.Scope), slog.String("bucket", qe.Bucket), slog.String("cause", qe.Cause.String()))
}

// settled tells the Trace of a request's true cost.
func (h *hooks) settled(ctx context.Context, r *request, charges []costs.Charge, err error) {
	if h.trace.Settled != nil {
		h.trace.Settled(ctx, decisionOf(r, settledNow, detail{err: err, charges: charges}))
	}
}

// slots tells the Trace of caps' slots taken (held) or given back.
func (h *hooks) slots(ctx context.Context, owners []caps.Owner, held bool) {
	if h.trace.Slot != nil {
		for _, o := range owners {
			h.trace.Slot(ctx, o.Scope, o.Bucket, held)
		}
	}
}

// took tells the Trace of the slots of buckets taken in scope.
func (h *hooks) took(ctx context.Context, scope string, buckets []string) {
	if h.trace.Slot != nil {
		for _, b := range buckets {
			h.trace.Slot(ctx, scope, b, true)
		}
	}
}

// switched tells the Trace and the log of a switch.
func (h *hooks) switched(ctx context.Context, s Switch) {
	if s.Up {
		h.log(ctx, slog.LevelWarn, "tollgate: redis answers again; decisions return to it")
	} else {
		h.log(ctx, slog.LevelWarn, "tollgate: redis unavailable; endpoints fall back on their outage mode", slog.Any("err", s.Err))
	}
	if h.trace.Switched != nil {
		h.trace.Switched(ctx, s)
	}
}

// paused tells the Trace of an upstream's pause.
func (h *hooks) paused(ctx context.Context, p UpstreamPause) {
	if h.trace.Paused != nil {
		h.trace.Paused(ctx, p)
	}
}

// reconciled tells the Trace of a reconciliation.
func (h *hooks) reconciled(ctx context.Context, rec Reconciliation) {
	if h.trace.Reconciled != nil {
		h.trace.Reconciled(ctx, rec)
	}
}

// log writes a record when a Logger is set.
func (h *hooks) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if h.logger != nil {
		h.logger.LogAttrs(ctx, level, msg, attrs...)
	}
}

// isQuotaError reports a refusal. (A function of its own, so that the
// error's target escapes only when there is an error.)
func isQuotaError(err error) bool {
	var qe *QuotaError
	return errors.As(err, &qe)
}
