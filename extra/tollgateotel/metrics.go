package tollgateotel

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
)

// instrumentationName names the meter, as OpenTelemetry asks: the import
// path of the instrumentation.
const instrumentationName = "github.com/tollgate/tollgate/extra/tollgateotel"

// timeInQueueBuckets are the histogram's bucket bounds in seconds: waits
// for a turn run from milliseconds (a busy second) to hours (a spent day).
var timeInQueueBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400}

// Metrics records the metrics of one Transport. Build it with New, give
// the Transport's Config to Instrument and the Transport to Observe. Its
// methods are safe for concurrent use.
type Metrics struct {
	scopes bool // tollgate.scope on every metric about a scope

	requests    metric.Int64Counter
	timeInQueue metric.Float64Histogram
	queued      metric.Int64UpDownCounter
	inFlight    metric.Int64UpDownCounter
	charged     metric.Int64Counter
	refunded    metric.Int64Counter
	settlements metric.Int64Counter
	pauses      metric.Int64Counter
	switches    metric.Int64Counter
	crossings   metric.Int64Counter
	burning     metric.Int64UpDownCounter
	shadow      metric.Int64Counter

	redisDown atomic.Bool // decisions fall back on the outage modes
	remaining remaining   // the quota gauges' reads
	reg       metric.Registration
	opts      optionCache
}

// New creates the instruments of the metrics the package documents, on
// the meter provider the options give.
func New(opts ...Option) (*Metrics, error) {
	c := newConfig(opts)
	b := &builder{meter: c.provider.Meter(instrumentationName)}
	m := &Metrics{scopes: c.scopes}
	m.requests = b.counter("tollgate.rate_limiting.requests", "{request}", "Requests the Transport decided, by endpoint and result.")
	m.timeInQueue = b.histogram("tollgate.rate_limiting.request.time_in_queue", "s", "How long requests waited for their turn.", timeInQueueBuckets)
	m.queued = b.upDown("tollgate.rate_limiting.queued_requests", "{request}", "Requests waiting for their turn.")
	m.inFlight = b.upDown("tollgate.rate_limiting.active_request_leases", "{request}", "Requests holding a slot of a bucket's cap on requests in flight.")
	m.charged = b.counter("tollgate.rate_limiting.units.charged", "{unit}", "Units admitted requests spend, and the extra that settled costs add.")
	m.refunded = b.counter("tollgate.rate_limiting.units.refunded", "{unit}", "Units given back by settled costs below their estimate.")
	m.settlements = b.counter("tollgate.rate_limiting.settlements", "{request}", "Responses that told a request's true cost.")
	m.pauses = b.counter("tollgate.upstream.pauses", "{pause}", "Pauses of a scope or bucket that the upstream asked for, by reason.")
	m.switches = b.counter("tollgate.redis.switches", "{switch}", "Switches between Redis and the outage modes.")
	m.crossings = b.counter("tollgate.window.crossings", "{crossing}", "Thresholds of a window's limit crossed (Config.Thresholds), by threshold.")
	m.burning = b.upDown("tollgate.window.burning", "{window}", "Windows whose burn-rate alert is on: spent before their units come back at the rates of both spans.")
	m.shadow = b.counter("tollgate.shadow.refusals", "{request}", "Requests the Shadow action sent that would have been refused, by bucket and cause.")
	available := b.gauge("tollgate.redis.available", "{state}", "1 while decisions go to Redis, 0 while the outage modes decide.")
	left := b.gauge("tollgate.quota.remaining", "{unit}", "Units left of each limit of a bucket.")
	limit := b.gauge("tollgate.quota.limit", "{unit}", "Each limit of a bucket, as the Transport enforces it (less the reserve).")
	if err := errors.Join(b.errs...); err != nil {
		return nil, fmt.Errorf("tollgateotel: %w", err)
	}
	reg, err := b.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		up := int64(1)
		if m.redisDown.Load() {
			up = 0
		}
		o.ObserveInt64(available, up)
		m.observeQuota(ctx, o, left, limit)
		return nil
	}, available, left, limit)
	if err != nil {
		return nil, fmt.Errorf("tollgateotel: %w", err)
	}
	m.reg = reg
	return m, nil
}

// builder creates instruments on a meter, gathering their errors.
type builder struct {
	meter metric.Meter
	errs  []error
}

func (b *builder) counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.errs = append(b.errs, err)
	return c
}

func (b *builder) upDown(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := b.meter.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.errs = append(b.errs, err)
	return c
}

func (b *builder) histogram(name, unit, desc string, bounds []float64) metric.Float64Histogram {
	h, err := b.meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(bounds...))
	b.errs = append(b.errs, err)
	return h
}

func (b *builder) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := b.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.errs = append(b.errs, err)
	return g
}

// Close stops the gauges' callback, for a Transport closed while the
// meter provider lives on.
func (m *Metrics) Close() error {
	return m.reg.Unregister()
}

// with returns the measurement options of an attribute set of shape sh;
// scope is left out unless WithScopes asked for it.
func (m *Metrics) with(sh shape, v1, v2, scope string) *options {
	return m.withCaller(sh, v1, v2, scope, "")
}

// withCaller is with, and the attribute tollgate.caller when caller is
// set: the Decision's Caller (tollgate.WithCaller), e.g. a gateway's
// caller, whose names are few and configured.
func (m *Metrics) withCaller(sh shape, v1, v2, scope, caller string) *options {
	a := attrs{shape: sh, v1: v1, v2: v2, caller: caller}
	if m.scopes {
		a.scope = scope
	}
	return m.opts.get(a)
}
