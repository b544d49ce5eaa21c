// Package tollgate keeps outbound API calls inside the upstream's quota.
//
// A [Transport] is an [http.RoundTripper] for an [http.Client]. For each
// request it looks up the unit cost in a cost table (package costs), names
// the quota pool the request spends from (its scope), and asks a shared
// limiter in Redis (package quota) for the units, keeping a reserve below
// the upstream's real quota. Then, as the endpoint's [Policy] says, it sends
// the request, waits its turn, fails with a [*QuotaError], or fails over to
// another route. Every process and region that shares the Redis shares the
// quota. When the upstream itself reports its quota spent, every worker
// holds off until it resets.
//
// Provider packages (providers/youtube) bundle a cost table, limits, scope
// and response reading into one constructor.
package tollgate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// Transport is an http.RoundTripper that charges every request to a shared
// quota before sending it.
//
// Set its fields before the first request and leave them unchanged after.
// A Transport is safe for concurrent use by multiple goroutines; Close it to
// release the in-process limiter of the Local outage mode.
type Transport struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// Limiter keeps the quota. Required; quota.NewEmbedded gives one
	// in-process Redis for a single process.
	Limiter *quota.Limiter

	// Costs maps each request to its endpoint and charges. Required.
	Costs *costs.Table

	// Buckets holds the limits of every bucket Costs charges, by name.
	Buckets map[string]Bucket

	// Scope names the quota pool of a request. nil puts every request in
	// DefaultScope.
	Scope ScopeFunc

	// Policy chooses what happens to an endpoint's requests when the quota
	// has no room, and while Redis is down. nil means the zero Policy
	// (wait up to DefaultMaxWait, fail closed) for every endpoint.
	Policy PolicyFunc

	// Routes are tried in order by endpoints whose policy is Failover.
	Routes []Route

	// Lease, when set, makes a scope's requests spend from leases taken in
	// Redis a block at a time, instead of asking Redis call by call: for hot
	// scopes. Requests that charge several buckets still ask call by call.
	Lease LeaseFunc

	// Transit is the longest a request may take from its admission to its
	// arrival upstream: waking from its wait, the trip, the upstream's own
	// queue. Sliding windows are lengthened by it, so that a request sent
	// late never lands in an upstream window together with the calls
	// admitted a window after it. 0 means DefaultTransit; a negative value,
	// none. Processes sharing a quota must agree on it, as on the limits.
	Transit time.Duration

	// LocalShare is the share of every limit the Local outage mode lets this
	// process spend while Redis is down, e.g. 0.125 for one of eight
	// instances. Required by policies that use Local.
	LocalShare float64

	// Upstream reads every response for what it says about the quota. nil
	// means DefaultUpstream (a 429 pauses the scope for its Retry-After).
	Upstream UpstreamFunc

	// OnDecision, when set, is called once per request with the decision.
	OnDecision DecisionHook

	// OnSwitch, when set, is called on every switch between Redis and the
	// outage modes.
	OnSwitch SwitchHook

	// Logger, when set, receives a record per refusal (Info), per switch
	// and per upstream quota signal (Warn), and per admission (Debug).
	Logger *slog.Logger

	once    sync.Once
	st      *state
	initErr error
	closed  atomic.Bool
}

// state is what the Transport derives from its fields on first use.
type state struct {
	limits    map[string][]quota.Limit // effective limits per bucket (less the reserve)
	local     map[string][]quota.Limit // LocalShare of them; nil without a share
	health    health
	exhausted exhausted // refusals known to hold for a while
	leases    leases    // this process's leases, per scope and bucket
}

// init checks the configuration and builds the state, once.
func (t *Transport) init() (*state, error) {
	t.once.Do(func() {
		t.st, t.initErr = t.build()
	})
	return t.st, t.initErr
}

func (t *Transport) build() (*state, error) {
	if t.Limiter == nil {
		return nil, configErrorf("Transport.Limiter is nil")
	}
	if t.Costs == nil {
		return nil, configErrorf("Transport.Costs is nil")
	}
	st := &state{limits: make(map[string][]quota.Limit, len(t.Buckets))}
	for _, name := range t.Costs.Buckets() {
		b, ok := t.Buckets[name]
		if !ok {
			return nil, configErrorf("the cost table charges bucket %q, which Transport.Buckets does not define", name)
		}
		lims, err := b.effective(name)
		if err != nil {
			return nil, err
		}
		st.limits[name] = lengthen(lims, t.transit())
	}
	if t.LocalShare < 0 || t.LocalShare > 1 {
		return nil, configErrorf("LocalShare %v is not within (0, 1]", t.LocalShare)
	}
	for i, r := range t.Routes {
		if r.Scope == "" && r.Base == nil {
			return nil, configErrorf("route %d (%q) has neither a Scope nor a Base", i, r.Name)
		}
	}
	if t.LocalShare > 0 {
		st.local = make(map[string][]quota.Limit, len(st.limits))
		for name, lims := range st.limits {
			st.local[name] = share(lims, t.LocalShare)
		}
	}
	st.health.newLocal = func() (*quota.Limiter, error) { return quota.NewEmbedded() }
	return st, nil
}

// Close ends the Transport's leases, giving back what they did not spend,
// releases the in-process limiter of the Local outage mode, and makes later
// requests fail with ErrClosed. It does not close the Limiter, which the
// caller owns, nor idle connections of Base.
func (t *Transport) Close() error {
	t.closed.Store(true)
	st, err := t.init()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return errors.Join(st.leases.endAll(ctx), st.health.close())
}

// CloseIdleConnections closes the idle connections of Base and of the
// routes' bases, when they can; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	type closer interface{ CloseIdleConnections() }
	if c, ok := t.base().(closer); ok {
		c.CloseIdleConnections()
	}
	for _, r := range t.Routes {
		if c, ok := r.Base.(closer); ok {
			c.CloseIdleConnections()
		}
	}
}

// transit is the Transit the Transport applies.
func (t *Transport) transit() time.Duration {
	switch {
	case t.Transit == 0:
		return DefaultTransit
	case t.Transit < 0:
		return 0
	}
	return t.Transit
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// call is one request on its way through the Transport.
type call struct {
	req      *http.Request
	endpoint costs.Endpoint
	scope    string
	policy   Policy
}

// RoundTrip charges the request's units to its quota, then sends it, waits,
// or fails, as its endpoint's policy says. It never modifies req, and it
// closes req.Body on every path, as http.RoundTripper requires.
//
// A request that is not sent returns an error: a *QuotaError (no room), an
// *UnavailableError (Redis down, failing closed), costs.ErrUnknownEndpoint,
// the context's error, or a configuration error (ErrConfig). When the
// upstream answers that its quota is spent, the Transport records that for
// every worker, closes the response and returns a *QuotaError with
// Upstream set, so that callers stop instead of retrying into the wall;
// every other response is returned as it is.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	bodyOwned := true // until the base transport takes the body over
	defer func() {
		if bodyOwned && req.Body != nil {
			req.Body.Close()
		}
	}()
	if t.closed.Load() {
		return nil, ErrClosed
	}
	st, err := t.init()
	if err != nil {
		return nil, err
	}
	c := &call{req: req}
	if c.endpoint, err = t.Costs.Resolve(req); err != nil {
		return nil, err
	}
	if c.scope, err = t.scope(req); err != nil {
		return nil, err
	}
	if t.Policy != nil {
		c.policy = t.Policy(c.endpoint)
	}

	start := time.Now()
	o, err := t.decide(req.Context(), st, c)
	o.waited = time.Since(start)
	t.report(req.Context(), c, o, err)
	if err != nil {
		return nil, err
	}

	// A reserved request goes out as a copy carrying a trace, to tell
	// whether it reached the upstream (for a refund); a deep copy only when
	// a route rewrites it. A request spent from a lease goes as it is: a
	// unit it loses to a failed dial only makes the lease end sooner.
	var trace *sendTrace
	out := req
	if o.res != nil {
		trace = new(sendTrace)
		out = req.WithContext(trace.attach(req.Context()))
	}
	base := t.base()
	if o.route != nil {
		if o.route.Rewrite != nil {
			out = req.Clone(out.Context())
			o.route.Rewrite(out)
		}
		if o.route.Base != nil {
			base = o.route.Base
		}
	}
	bodyOwned = false
	resp, err := base.RoundTrip(out)
	if err != nil {
		if trace != nil && trace.neverSent(err) {
			t.refund(req.Context(), c, o)
		}
		return nil, err
	}
	return t.read(req.Context(), st, c, o, resp)
}

// scope names the request's pool.
func (t *Transport) scope(req *http.Request) (string, error) {
	if t.Scope == nil {
		return DefaultScope, nil
	}
	s, err := t.Scope(req)
	if err == nil && s == "" {
		err = errors.New("tollgate: the scope func returned an empty scope")
	}
	return s, err
}

// read hands the response to the upstream reader. When it says the quota is
// spent, every worker is paused and the caller gets a *QuotaError.
func (t *Transport) read(ctx context.Context, st *state, c *call, o outcome, resp *http.Response) (*http.Response, error) {
	upstream := t.Upstream
	if upstream == nil {
		upstream = DefaultUpstream
	}
	v := upstream(resp, c.endpoint)
	if !v.Spent {
		return resp, nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	resp.Body.Close()

	qe := &QuotaError{Endpoint: c.endpoint.Name, Scope: o.scope(c), Cost: c.endpoint.Units(), RetryAfter: v.Pause, Upstream: true}
	buckets := v.Buckets
	if len(buckets) == 0 {
		buckets = []string{""}
	} else {
		qe.Bucket = buckets[0]
		qe.Cost = unitsOf(c.endpoint, buckets[0])
	}
	until := time.Now().Add(v.Pause)
	for _, b := range buckets {
		st.exhausted.note(qe.Scope, b, 0, true, until)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if o.limiter != nil && v.Pause > 0 {
		for _, b := range buckets {
			if err := o.limiter.Pause(pctx, qe.Scope, b, v.Pause); err != nil {
				t.log(ctx, slog.LevelWarn, "tollgate: could not record the upstream's quota signal",
					slog.String("scope", qe.Scope), slog.String("bucket", b), slog.Any("err", err))
			}
		}
	}
	t.log(ctx, slog.LevelWarn, "tollgate: upstream reports its quota spent",
		slog.String("endpoint", qe.Endpoint), slog.String("scope", qe.Scope),
		slog.Any("buckets", v.Buckets), slog.Duration("pause", v.Pause), slog.Int("status", resp.StatusCode))
	return nil, qe
}

// refund gives back the units of a request that never reached the upstream.
func (t *Transport) refund(ctx context.Context, c *call, o outcome) {
	if o.res == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := o.res.Cancel(cctx); err != nil {
		t.log(ctx, slog.LevelWarn, "tollgate: could not refund a request that was never sent",
			slog.String("endpoint", c.endpoint.Name), slog.Any("err", err))
	}
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

// report calls the decision hook and logs the decision.
func (t *Transport) report(ctx context.Context, c *call, o outcome, err error) {
	d := Decision{
		Endpoint: c.endpoint.Name,
		Scope:    o.scope(c),
		Charges:  c.endpoint.Charges,
		Admitted: err == nil,
		Waited:   o.waited,
		Mode:     o.mode,
		Err:      err,
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
		d.Cached = qe.cached
	}
	if t.OnDecision != nil {
		t.OnDecision(ctx, d)
	}
	if t.Logger == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("endpoint", d.Endpoint), slog.String("scope", d.Scope),
		slog.Int64("units", c.endpoint.Units()), slog.String("mode", d.Mode.String()),
	}
	switch {
	case err == nil:
		attrs = append(attrs, slog.Duration("waited", d.Waited))
		if d.Route != "" {
			attrs = append(attrs, slog.String("route", d.Route))
		}
		t.Logger.LogAttrs(ctx, slog.LevelDebug, "tollgate: admitted", attrs...)
	case qe != nil:
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
		t.Logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: refused", attrs...)
	default:
		attrs = append(attrs, slog.Any("err", err))
		t.Logger.LogAttrs(ctx, slog.LevelInfo, "tollgate: not sent", attrs...)
	}
}

// log writes a record when a Logger is set.
func (t *Transport) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if t.Logger != nil {
		t.Logger.LogAttrs(ctx, level, msg, attrs...)
	}
}
