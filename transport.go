// Package tollgate keeps outbound API calls inside the upstream's quota.
//
// Begin with [New]: it builds a [Transport], an [http.RoundTripper] for an
// [http.Client], from a [Config] that names a limiter (quota.New on a Redis
// client; package quota/embedded runs one in-process), a cost table
// (package costs) and the limits of each bucket the table charges. The
// package's Example is a whole program against a local server. For a known
// upstream, a provider's NewTransport does all of it in one call:
// providers/youtube (YouTube Data API v3), providers/github (GitHub REST and
// GraphQL), providers/openai (OpenAI and servers that speak its protocol),
// providers/gemini (Google's Gemini API).
//
// For each request a Transport looks up its unit cost in the cost table,
// names the quota pool the request spends from (its scope), and asks the
// limiter in Redis for the units, keeping a reserve below the upstream's
// real quota. Then, as the endpoint's [Policy] says, it sends the request,
// waits its turn, fails with a [*QuotaError] (errors.Is(err,
// [ErrQuotaExhausted])), or fails over to another route; while Redis is
// down, it fails closed, open, or on a local share of the limits. Every
// process and region that shares the Redis shares the quota. When the
// upstream itself reports its quota spent, every worker holds off until it
// resets.
//
// The README and the pages of docs/ in the repository say more: the
// providers, several processes, policies and outages, settlement, caps and
// priorities, announced quotas, operating, metrics, failure modes,
// performance, the Redis format and upgrading. docs/design.md follows a
// request through the code, file by file.
package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// Config is what a Transport is built from. The zero value of every field
// but Limiter, Costs and Buckets means a documented default.
type Config struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// Limiter keeps the quota in Redis. Required. Every process sharing a
	// quota gives it a client of the same Redis.
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

	// Lease, when set, makes the requests of the scopes and buckets it
	// chooses spend from leases taken in Redis a block at a time, instead
	// of asking Redis call by call: for hot scopes. Requests that charge
	// several buckets still ask call by call.
	Lease LeaseFunc

	// Transit is the longest a request may take from its admission to its
	// arrival upstream: waking from its wait, the trip, the upstream's own
	// queue. Sliding and fixed windows are lengthened by it, so that a
	// request sent late never lands in an upstream window together with
	// the calls admitted a window after it. A request that reaches the
	// base transport later than Transit after its admission (a loaded
	// machine, a slow hook) is decided again, its first admission given
	// back, rather than sent late. 0 means DefaultTransit; a negative
	// value, none (and no such check). Processes sharing a quota must
	// agree on it, as on the limits.
	Transit time.Duration

	// LocalLimiter is the limiter of the FailLocal outage mode: one that this
	// process alone uses, such as quota.New on an in-process Redis
	// (package quota/embedded). The Transport never closes it. Required,
	// with LocalShare, by policies that use FailLocal.
	LocalLimiter *quota.Limiter

	// LocalShare is the share of every limit the FailLocal outage mode
	// lets this process spend while Redis is down, e.g. 0.125 for one of
	// eight instances.
	LocalShare float64

	// BackgroundShare is the share of each limit, after the reserve, that
	// background requests (see Policy.Priority) may spend; interactive
	// requests may spend all of it. 0 means 0.8.
	BackgroundShare float64

	// ReadResponse reads every response for what it says about the quota. nil
	// means DefaultUpstream (a 429 pauses the scope for its Retry-After).
	ReadResponse UpstreamFunc

	// OnDecision, when set, is called once per request with the decision,
	// and again with each new decision of a request decided again because
	// it reached the base transport later than Transit after its admission.
	OnDecision DecisionHook

	// OnWait, when set, is called when a request takes a hold and is about
	// to sleep until its turn: the Decision's At is when the turn comes.
	// OnDecision follows when the wait ends.
	OnWait DecisionHook

	// OnWaitEnd, when set, is called when a wait that OnWait reported
	// ends, once per OnWait: the Decision's Waited is how long it waited,
	// Admitted whether its turn came, and Err, when it did not, why
	// (a *QuotaError when MaxWait passed, the context's error when the
	// caller gave up). A request decided again, because an announcement
	// changed its bucket's limit or a pause reached it while it waited, or
	// because it reached Base later than Transit after its admission, may
	// wait more than once.
	OnWaitEnd DecisionHook

	// OnSettle, when set, is called when a response tells a request's true
	// cost (costs.Rule.Settle): the Decision's Charges are what the request
	// now counts, and its Err says why an estimate was kept instead.
	OnSettle DecisionHook

	// OnReconcile, when set, is called when a response's announcement of
	// a bucket's quota (Bucket.Follows) changed the shared count, taught
	// a limit, or paused the bucket.
	OnReconcile ReconcileHook

	// OnSwitch, when set, is called on every switch between Redis and the
	// outage modes.
	OnSwitch SwitchHook

	// OnSlot, when set, is called when a request takes a slot of a
	// bucket's cap on requests in flight, and when it gives it back.
	OnSlot SlotHook

	// OnPause, when set, is called when a response says the upstream's
	// quota is spent (see Upstream) and the scope or its buckets pause.
	OnPause PauseHook

	// Logger, when set, receives a record per refusal (Info), per switch,
	// per upstream quota signal and per request handed to Base later than
	// Transit after its admission (Warn), and per admission (Debug).
	Logger *slog.Logger
}

// Transport is an http.RoundTripper that charges every request to a shared
// quota before sending it. Build one with New; it is safe for concurrent
// use by multiple goroutines. Close it to end its leases.
type Transport struct {
	cfg      Config
	base     http.RoundTripper
	redis    decider  // the shared limiter and the limits it enforces
	local    *decider // the FailLocal mode's; nil without one
	upstream UpstreamFunc
	now      func() time.Time // the local clock; tests replace it
	bgShare  float64          // of each limit, for background requests
	transit  time.Duration    // Config.Transit, or its default; 0: none

	beforeHandoff func() // tests slow the path to the base transport with it

	announced map[string]string // bucket: the announced quota it follows
	learn     learnedState      // what announcements taught, per scope bucket
	holds     holdWaiters       // the requests waiting for holds on announced buckets
	waiters   waiters           // the requests waiting for a hold's turn or a cap's slot, for pauses to reach

	probe     probe     // whether Redis answers
	ledger    ledger    // units spent while it did not
	exhausted exhausted // refusals known to hold for a while
	leases    leases    // this process's leases, per scope and bucket
	held      heldSlots // the slots of requests in flight
	usage     usageReads
	closed    atomic.Bool

	described described // the scope buckets described for operators
	listening listening // to the pauses and resumes others tell
}

// New checks cfg and builds its Transport. It reports, as an error
// matching ErrConfig, everything that would make a request fail for want
// of configuration: a missing Limiter or Costs, a bucket the table charges
// without limits in Buckets, limits or reserves that leave no room, a
// route with nowhere to go, and a policy (as PolicyFunc gives it for each
// rule of the table) that needs Routes, Local or LocalShare when they are
// not set.
func New(cfg Config) (*Transport, error) {
	if cfg.Limiter == nil {
		return nil, configErrorf("Config.Limiter is nil")
	}
	if cfg.Costs == nil {
		return nil, configErrorf("Config.Costs is nil")
	}
	t := &Transport{cfg: cfg, base: cfg.Base, upstream: cfg.ReadResponse, now: time.Now}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.upstream == nil {
		t.upstream = DefaultUpstream
	}
	t.transit = transit(cfg.Transit)
	limits, caps, err := enforced(cfg.Costs.Buckets(), cfg.Buckets, t.transit)
	if err != nil {
		return nil, err
	}
	share := cfg.BackgroundShare
	if share == 0 {
		share = defaultBackgroundShare
	}
	if !(share > 0 && share <= 1) {
		return nil, configErrorf("BackgroundShare %v is not within (0, 1]", cfg.BackgroundShare)
	}
	t.bgShare = share
	t.redis = decider{lim: cfg.Limiter, limits: limits, background: shareOf(limits, share), caps: caps}
	for name, b := range cfg.Buckets {
		if b.Follows != "" {
			if t.announced == nil {
				t.announced = make(map[string]string)
			}
			t.announced[name] = b.Follows
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
	if cfg.LocalLimiter != nil {
		local := shareOf(limits, cfg.LocalShare)
		t.local = &decider{lim: cfg.LocalLimiter, limits: local, background: shareOf(local, share), caps: capsOf(caps, cfg.LocalShare), local: true}
	}
	if err := t.checkPolicies(); err != nil {
		return nil, err
	}
	t.exhausted.noted = t.listenSoon
	return t, nil
}

// checkPolicies asks the PolicyFunc for the policy of every rule in the
// cost table and checks that each can be followed.
func (t *Transport) checkPolicies() error {
	if t.cfg.Policy == nil {
		return nil
	}
	spec := t.cfg.Costs.Spec()
	rules := spec.Rules
	if spec.Default != nil {
		rules = append(rules, *spec.Default)
	}
	for _, r := range rules {
		e := costs.Endpoint{Name: r.Endpoint, Charges: r.Charges, Free: r.Free || r.Continues, Continues: r.Continues, Settle: r.Settle}
		if err := t.checkPolicy(t.cfg.Policy(e)); err != nil {
			return configErrorf("endpoint %q: %v", r.Endpoint, err)
		}
	}
	return nil
}

// checkPolicy reports why the Transport cannot follow p.
func (t *Transport) checkPolicy(p Policy) error {
	switch {
	case p.OnRefusal < WaitTurn || p.OnRefusal > Failover:
		return errors.New("unknown OnRefusal action " + p.OnRefusal.String())
	case p.AfterFailover != WaitTurn && p.AfterFailover != Refuse:
		return errors.New("AfterFailover must be WaitTurn or Refuse, not " + p.AfterFailover.String())
	case p.OnRefusal == Failover && len(t.cfg.Routes) == 0:
		return errors.New("the policy fails over, but Config.Routes is empty")
	case p.OnOutage < FailClosed || p.OnOutage > FailLocal:
		return errors.New("unknown OnOutage mode " + p.OnOutage.String())
	case p.OnOutage == FailLocal && t.local == nil:
		return errors.New("the policy uses the FailLocal outage mode, but Config.LocalLimiter and LocalShare are not set")
	}
	return nil
}

// Close ends the Transport's leases, giving back what they did not spend,
// gives back the slots of requests still in flight, and makes later
// requests fail with ErrClosed. It closes neither the limiters, which the
// caller owns, nor idle connections of Base.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.stopListening()
	t.described.writing.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	leaseErr := t.leases.endAll(ctx)
	caps, err := t.held.releaseAll(ctx)
	t.gaveBack(caps)
	return errors.Join(leaseErr, err)
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

// call is one request on its way through the Transport.
type call struct {
	req        *http.Request
	endpoint   costs.Endpoint
	scope      string
	policy     Policy
	background bool // its policy or its context says Background
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
	c := &call{req: req}
	var err error
	if c.endpoint, err = t.cfg.Costs.Resolve(req); err != nil {
		return nil, err
	}
	if c.scope, err = scopeOf(t.cfg.Scope, req); err != nil {
		return nil, err
	}
	if t.cfg.Policy != nil {
		c.policy = t.cfg.Policy(c.endpoint)
		if err := t.checkPolicy(c.policy); err != nil {
			return nil, configErrorf("endpoint %q: %v", c.endpoint.Name, err)
		}
	}
	c.background = c.policy.Priority == quota.Background || quota.PriorityOf(req.Context()) == quota.Background

	start := t.now()
	o, err := t.decide(req.Context(), c)
	o.waited = t.now().Sub(start)
	t.report(req.Context(), c, o, err)
	if err != nil {
		return nil, err
	}
	if o, err = t.handoff(req.Context(), c, o); err != nil {
		return nil, err
	}
	bodyOwned = false
	resp, err := t.send(c, o)
	if err != nil {
		return nil, err
	}
	return t.read(req.Context(), c, o, resp)
}
