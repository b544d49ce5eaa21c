package tollgateotel

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// The values of tollgate.rate_limiting.result.
const (
	resultAdmitted     = "admitted"
	resultLeased       = "leased"
	resultLocal        = "local"
	resultUnmetered    = "unmetered"
	resultFree         = "free"
	resultRefused      = "refused"
	resultCached       = "cached"
	resultCancelled    = "cancelled"
	resultUnavailable  = "unavailable"
	resultError        = "error"
	resultSettled      = "settled"
	resultEstimateKept = "estimate_kept"
)

// announcedReason is the pause reason of a bucket paused because the
// upstream announced that nothing was left of it (Bucket.Follows).
const announcedReason = "announced"

// Instrument returns cfg with the recording of the metrics merged into
// its Trace (tollgate.Trace.Merge): the functions cfg's Trace already has
// are still called, after the recording, as WithClientTrace stacks
// httptrace's. Give the result to tollgate.New, or to a provider as the
// Config it takes (youtube.Options.Tollgate), once: a Metrics records one
// Transport.
func (m *Metrics) Instrument(cfg tollgate.Config) tollgate.Config {
	cfg.Trace = tollgate.Trace{
		Decided:     m.decided,
		WaitStarted: m.waitStarted,
		WaitEnded:   m.waitEnded,
		Settled:     m.settled,
		Reconciled:  m.reconciled,
		Switched:    m.switched,
		Slot:        m.slot,
		Paused:      m.paused,
		Crossed:     m.crossed,
		Burning:     m.burn,
		WouldRefuse: m.wouldRefuse,
	}.Merge(cfg.Trace)
	return cfg
}

// decided records a request's decision, and notes its scope's buckets for
// the quota gauges.
func (m *Metrics) decided(ctx context.Context, d tollgate.Decision) {
	m.requests.Add(ctx, 1, m.withCaller(byEndpointResult, d.Endpoint, resultOf(d), d.Scope, d.Caller).add...)
	for _, ch := range d.Charges {
		m.remaining.see(d.Scope, ch.Bucket)
		if d.Admitted && ch.Units > 0 {
			m.charged.Add(ctx, ch.Units, m.withCaller(byEndpointBucket, d.Endpoint, ch.Bucket, d.Scope, d.Caller).add...)
		}
	}
}

// resultOf names what became of a request.
func resultOf(d tollgate.Decision) string {
	switch {
	case d.Admitted && d.Leased:
		return resultLeased
	case d.Admitted && d.Local:
		return resultLocal
	case d.Admitted && d.Unmetered:
		return resultUnmetered
	case d.Admitted && d.Free:
		return resultFree
	case d.Admitted:
		return resultAdmitted
	case d.Cached:
		return resultCached
	}
	return failure(d.Err)
}

// failure names why a request was not admitted.
func failure(err error) string {
	switch {
	case errors.Is(err, tollgate.ErrQuotaExhausted):
		return resultRefused
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resultCancelled
	case errors.Is(err, tollgate.ErrUnavailable):
		return resultUnavailable
	}
	return resultError
}

// wouldRefuse counts a request the Shadow action sent that would have
// been refused, by the bucket without room and why.
func (m *Metrics) wouldRefuse(ctx context.Context, d tollgate.Decision) {
	var qe *tollgate.QuotaError
	if !errors.As(d.Err, &qe) {
		return
	}
	m.shadow.Add(ctx, 1, m.withCaller(byBucketCause, qe.Bucket, causeOf(qe.Cause), d.Scope, d.Caller).add...)
}

// causeOf names a refusal's cause, as tollgate status spells it.
func causeOf(c tollgate.Cause) string {
	switch c {
	case tollgate.NoRoom:
		return "no-room"
	case tollgate.PausedByUpstream:
		return "upstream-pause"
	case tollgate.PausedByOperator:
		return "operator-pause"
	case tollgate.CapFull:
		return "cap"
	case tollgate.RedisDown:
		return "redis-down"
	}
	return "other"
}

// waitStarted counts a request that starts waiting for its turn.
func (m *Metrics) waitStarted(ctx context.Context, d tollgate.Decision) {
	m.queued.Add(ctx, 1, m.withCaller(byEndpoint, d.Endpoint, "", d.Scope, d.Caller).add...)
}

// waitEnded counts it out, and records how long it waited.
func (m *Metrics) waitEnded(ctx context.Context, d tollgate.Decision) {
	m.queued.Add(ctx, -1, m.withCaller(byEndpoint, d.Endpoint, "", d.Scope, d.Caller).add...)
	result := resultAdmitted
	if !d.Admitted {
		result = failure(d.Err)
	}
	m.timeInQueue.Record(ctx, d.Waited.Seconds(), m.withCaller(byEndpointResult, d.Endpoint, result, d.Scope, d.Caller).record...)
}

// settled records a true cost a response told: the settlement, and the
// units it added to, or took from, the estimate.
func (m *Metrics) settled(ctx context.Context, d tollgate.Decision) {
	result := resultSettled
	if d.Err != nil {
		result = resultEstimateKept
	}
	m.settlements.Add(ctx, 1, m.withCaller(byEndpointResult, d.Endpoint, result, d.Scope, d.Caller).add...)
	for _, ch := range d.Charges {
		for _, est := range d.Estimate {
			if est.Bucket != ch.Bucket || est.Units == ch.Units {
				continue
			}
			opts := m.withCaller(byEndpointBucket, d.Endpoint, ch.Bucket, d.Scope, d.Caller).add
			if ch.Units > est.Units {
				m.charged.Add(ctx, ch.Units-est.Units, opts...)
			} else {
				m.refunded.Add(ctx, est.Units-ch.Units, opts...)
			}
		}
	}
}

// slot counts the slots of caps held.
func (m *Metrics) slot(ctx context.Context, scope, bucket string, held bool) {
	n := int64(-1)
	if held {
		n = 1
	}
	m.inFlight.Add(ctx, n, m.with(byBucket, bucket, "", scope).add...)
}

// paused counts a pause the upstream asked for: one per bucket it names,
// or one for the whole scope.
func (m *Metrics) paused(ctx context.Context, p tollgate.UpstreamPause) {
	if len(p.Buckets) == 0 {
		m.pauses.Add(ctx, 1, m.with(byReasonBucket, p.Reason, "", p.Scope).add...)
	}
	for _, b := range p.Buckets {
		m.pauses.Add(ctx, 1, m.with(byReasonBucket, p.Reason, b, p.Scope).add...)
	}
}

// reconciled counts the pause of a bucket whose announcement said that
// nothing was left.
func (m *Metrics) reconciled(ctx context.Context, r tollgate.Reconciliation) {
	if r.Paused {
		m.pauses.Add(ctx, 1, m.with(byReasonBucket, announcedReason, r.Bucket, r.Scope).add...)
	}
}

// switched records a switch between Redis and the outage modes.
func (m *Metrics) switched(ctx context.Context, s tollgate.Switch) {
	m.redisDown.Store(!s.Up)
	state := "down"
	if s.Up {
		state = "up"
	}
	m.switches.Add(ctx, 1, m.with(byState, state, "", "").add...)
}

// crossed counts a threshold of a window's limit crossed. Crossings are
// rare (a few a window), so their attribute sets are built each time.
func (m *Metrics) crossed(ctx context.Context, c tollgate.Alert) {
	m.crossings.Add(ctx, 1, metric.WithAttributes(m.windowAttrs(c.Scope, c.Bucket, c.Limit,
		thresholdKey.String(strconv.FormatFloat(c.Threshold, 'g', -1, 64)))...))
}

// burn counts the windows whose burn-rate alert is on: one more when it
// starts, one less when it ends.
func (m *Metrics) burn(ctx context.Context, a tollgate.Alert) {
	n := int64(-1)
	if a.Firing {
		n = 1
	}
	m.burning.Add(ctx, n, metric.WithAttributes(m.windowAttrs(a.Scope, a.Bucket, a.Limit)...))
}

// windowAttrs are the attributes of a window's alert: its bucket and
// window, the scope when WithScopes asked for it, and more.
func (m *Metrics) windowAttrs(scope, bucket string, l quota.Limit, more ...attribute.KeyValue) []attribute.KeyValue {
	kvs := append([]attribute.KeyValue{bucketKey.String(bucket), windowKey.String(windowName(l))}, more...)
	if m.scopes && scope != "" {
		kvs = append(kvs, scopeKey.String(scope))
	}
	return kvs
}
