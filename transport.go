package tollgate

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/forecast"
	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/internal/lease"
	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/internal/remember"
	"github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/quota"
)

// Transport is an http.RoundTripper that charges every request to a shared
// quota before sending it. Build one with New; it is safe for concurrent
// use by multiple goroutines. Close it to end its leases.
type Transport struct {
	cfg    Config
	base   http.RoundTripper
	clock  *clock
	hooks  *hooks
	limits *limits
	redis  *decider // the shared limiter and the limits it enforces

	path    path     // what a request passes before it is sent
	readers []reader // what reads its response, in order

	beforeHandoff func() // tests slow the path to the base transport with it

	// The mechanisms the stages use, each in its own package.
	refusals  remember.Refusals
	leases    lease.Leases
	listening notices.Listening
	waiters   notices.Waiters
	holds     learn.Holds
	gates     gates
	described described
	hearing   hearing
	settling  settling
	usage     usageReads
	alerts    *alerts      // nil unless the Trace has alert functions
	needs     *needsCheck  // nil without a Logger (needs.go)
	flusher   spendFlusher // writes what this process spends (spending.go)
	closed    atomic.Bool
}

// clock is the Transport's local clock; tests replace it (SetClock).
type clock struct{ now func() time.Time }

// New checks cfg and builds its Transport. It reports, as an error
// matching ErrConfig, everything that would make a request fail for want
// of configuration: a missing Limiter or Costs, a bucket the table charges
// without limits in Buckets, limits or reserves that leave no room, a
// rule charging more units than a limit of its bucket admits, a
// route with nowhere to go, and a policy (as Config.Policy gives it for each
// rule of the table) that needs Routes, Local or LocalShare when they are
// not set.
func New(cfg Config) (*Transport, error) {
	if cfg.Limiter == nil {
		return nil, configErrorf("Config.Limiter is nil")
	}
	if cfg.Costs == nil {
		return nil, configErrorf("Config.Costs is nil")
	}
	t := &Transport{cfg: cfg, base: cfg.Base, clock: &clock{now: time.Now}, hooks: hooksOf(&cfg)}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	a := &limits{buckets: cfg.Buckets, transit: transit(cfg.Transit), background: cfg.BackgroundShare, localShare: cfg.LocalShare, name: cfg.Name}
	if a.name == "" {
		a.name = spend.DefaultProcess()
	}
	upstream, caps, err := configured(cfg.Costs.Buckets(), cfg.Buckets)
	if err != nil {
		return nil, err
	}
	if a.background == 0 {
		a.background = defaultBackgroundShare
	}
	if !(a.background > 0 && a.background <= 1) {
		return nil, configErrorf("BackgroundShare %v is not within (0, 1]", cfg.BackgroundShare)
	}
	for name, b := range cfg.Buckets {
		if b.Follows != "" {
			if a.announced == nil {
				a.announced = make(map[string]string)
			}
			a.announced[name] = b.Follows
		}
	}
	for i, r := range cfg.Routes {
		if r.Scope == "" && r.Base == nil {
			return nil, configErrorf("route %d (%q) has neither a Scope nor a Base", i, r.Name)
		}
	}
	if cfg.LocalShare < 0 || cfg.LocalShare > 1 || cfg.LocalShare != cfg.LocalShare {
		return nil, configErrorf("LocalShare %v is not within (0, 1]", cfg.LocalShare)
	}
	if (cfg.LocalLimiter == nil) != (cfg.LocalShare == 0) {
		return nil, configErrorf("LocalLimiter and LocalShare go together: set both for the FailLocal outage mode, or neither")
	}
	if err := checkPolicies(&cfg, cfg.LocalLimiter != nil); err != nil {
		return nil, err
	}
	if err := checkCharges(&cfg, a, upstream); err != nil {
		return nil, err
	}
	var thresholds *forecast.Thresholds
	if len(cfg.Thresholds) > 0 {
		if thresholds, err = forecast.NewThresholds(cfg.Thresholds...); err != nil {
			return nil, configErrorf("Thresholds %v: each must be a fraction of the limit in (0, 1]", cfg.Thresholds)
		}
	}
	t.limits, t.redis = a, a.decider(cfg.Limiter, upstream, caps, false)
	var local *decider
	if cfg.LocalLimiter != nil {
		local = a.decider(cfg.LocalLimiter, upstream, caps, true)
	}

	// The mechanisms, and how they reach one another.
	t.gates.limits, t.gates.hooks = a, t.hooks
	t.described.limiter, t.described.redis, t.described.limits, t.described.closed, t.described.hooks = cfg.Limiter, t.redis, a, &t.closed, t.hooks
	t.hearing = hearing{limiter: cfg.Limiter, refusals: &t.refusals, leases: &t.leases, listening: &t.listening,
		waiters: &t.waiters, described: &t.described, clock: t.clock}
	outages := &outages{redis: t.redis, local: local, listening: &t.listening, hooks: t.hooks}
	l := &t.listening
	l.Subscribe, l.Apply, l.Resync, l.Down, l.Log = cfg.Limiter.Listen, t.hearing.apply, t.hearing.resync, outages.probe.Down, t.hooks.log
	l.Now = func() time.Time { return t.clock.now() }
	l.Needed = func() bool { now := t.clock.now(); return t.leases.Live(now) || t.refusals.Live(now) }
	t.refusals.Noted = l.Soon

	// The path of a request, in order.
	memory := &memory{refusals: &t.refusals, redis: t.redis}
	leasing := &leasing{choose: cfg.Lease, leases: &t.leases, limits: a, redis: t.redis, listening: l, hooks: t.hooks, clock: t.clock}
	decision := &decision{redis: t.redis, limits: a, gates: &t.gates, refusals: &t.refusals, hooks: t.hooks, routes: cfg.Routes,
		listening: l, waiters: &t.waiters, holds: &t.holds, limiter: cfg.Limiter, clock: t.clock}
	outages.decision = decision
	t.path = path{
		before:    []stage{memory.free, leasing.spend},
		outages:   outages,
		onRedis:   []stage{leasing.renew, memory.refusal, decision.onRedis},
		described: &t.described,
	}
	// handoff and send (send.go) come between; then the readers of the
	// response, in order.
	announcements := &announcements{limits: a, redis: t.redis, refusals: &t.refusals, holds: &t.holds, gates: &t.gates, hooks: t.hooks}
	verdicts := &verdicts{read: cfg.ReadResponse, refusals: &t.refusals, gates: &t.gates, hooks: t.hooks}
	if verdicts.read == nil {
		verdicts.read = DefaultUpstream
	}
	t.settling = settling{gates: &t.gates, hooks: t.hooks}
	t.readers = []reader{announcements.read, verdicts.verdict, t.settling.meter}
	if err := t.startSpending(cfg.Name, 0); err != nil {
		return nil, err
	}
	// Last: the alerts' goroutine starts here, once nothing can fail, and
	// so does the check of what the Redis keeps.
	t.alerts = newAlerts(&cfg, t.redis.limits, thresholds, t.hooks)
	t.needs = startNeeds(&cfg, t.hooks)
	return t, nil
}

// Close ends the Transport's leases, giving back what they did not spend,
// gives back the slots of requests still in flight, stops writing what
// this process spends after a last write of what it spent since the one
// before (its record, under Config.Name, ages out with its span), and
// makes later requests fail with ErrClosed. It closes neither the limiters, which the
// caller owns, nor idle connections of Base.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.needs.stop()
	t.alerts.close()
	t.listening.Stop()
	t.described.writing.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	leaseErr := t.leases.EndAll(ctx)
	err := t.gates.releaseAll(ctx)
	spendErr := t.stopSpending(ctx)
	return errors.Join(leaseErr, err, spendErr)
}

// CloseIdleConnections closes the idle connections of Base and of the
// routes' bases, when they can; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	type closer interface{ CloseIdleConnections() }
	if c, ok := t.base.(closer); ok {
		c.CloseIdleConnections()
	}
	for _, r := range t.cfg.Routes {
		if c, ok := r.Base.(closer); ok {
			c.CloseIdleConnections()
		}
	}
}

// RoundTrip charges the request's units to its quota, then sends it, waits,
// or fails, as its endpoint's policy says. It never modifies req, and it
// closes req.Body on every path, as http.RoundTripper requires.
//
// A request that is not sent returns an error: a *QuotaError (no room), an
// *UnavailableError (Redis down, failing closed), costs.ErrUnknownEndpoint,
// the context's error, quota.ErrFormat (Redis holds state of another
// tollgate format), a configuration error (ErrConfig), or an error saying
// that the request reached Base later than Transit after each of five
// admissions (a machine too loaded for its Transit). When the upstream
// answers that its quota is spent, the Transport records that for every
// worker, closes the response and returns a *QuotaError whose Cause is
// PausedByUpstream,
// so that callers stop instead of retrying into the wall; every other
// response is returned as it is.
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
	r := &request{req: req, t: t}
	var err error
	if r.endpoint, err = t.cfg.Costs.Resolve(req); err != nil {
		return nil, err
	}
	if r.scope, err = scopeOf(t.cfg.Scope, req); err != nil {
		return nil, err
	}
	if t.cfg.Policy != nil {
		r.policy = t.cfg.Policy(r.endpoint)
		if err := checkPolicy(r.policy, len(t.cfg.Routes) > 0, t.cfg.LocalLimiter != nil); err != nil {
			return nil, configErrorf("endpoint %q: %v", r.endpoint.Name, err)
		}
	}
	r.background = r.policy.Priority == quota.Background || priorityOf(req.Context()) == quota.Background

	ctx := req.Context()
	if err := t.decide(ctx, r); err != nil {
		return nil, err
	}
	if err := t.handoff(ctx, r); err != nil {
		return nil, err
	}
	bodyOwned = false
	t.hooks.spent(r, 1)
	resp, err := t.send(r)
	if err != nil {
		return nil, err
	}
	// The readers' instant: the response's arrival.
	r.now = t.clock.now()
	for _, read := range t.readers {
		if resp, err = read(ctx, r, resp); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// decide runs the request's path to its decision, from the request's
// instant, read once here, and tells the hooks of it.
func (t *Transport) decide(ctx context.Context, r *request) error {
	r.now = t.clock.now()
	err := t.path.admit(ctx, r)
	if err == nil {
		t.alerts.admitted(r)
	} else {
		t.hooks.refusedBy(r, err)
	}
	t.hooks.decided(ctx, r, t.clock.now().Sub(r.now), err)
	return err
}
