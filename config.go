package tollgate

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	// the pool "default" (the scope to name in Transport.Usage).
	Scope ScopeFunc

	// Policy chooses what happens to an endpoint's requests when the quota
	// has no room, and while Redis is down: Policies builds one from a
	// table, or write your own to choose by the endpoint's cost or
	// buckets. It is called on every request and must be safe for
	// concurrent use. nil means the zero Policy (wait up to a minute, fail
	// closed) for every endpoint.
	Policy func(endpoint costs.Endpoint) Policy

	// Routes are tried in order by endpoints whose policy is Failover.
	Routes []Route

	// Lease, when set, makes the requests of the scopes and buckets it
	// chooses spend from leases taken in Redis a block at a time, instead
	// of asking Redis call by call: for hot scopes. For a scope's bucket,
	// it returns the units of each lease (taken in Redis in one decision,
	// spent by this process without a round trip per call) and the
	// longest a lease lasts, term; zero units mean call by call. It is
	// called on every request that charges a single bucket and must be
	// safe for concurrent use; requests that charge several buckets still
	// ask call by call. See quota.Lease for what a lease guarantees.
	Lease func(scope, bucket string) (units int64, term time.Duration)

	// Transit is the longest a request may take from its admission to its
	// arrival upstream: waking from its wait, the trip, the upstream's own
	// queue. Sliding and fixed windows are lengthened by it, so that a
	// request sent late never lands in an upstream window together with
	// the calls admitted a window after it. A request that reaches the
	// base transport later than Transit after its admission (a loaded
	// machine, a slow hook) is decided again, its first admission given
	// back, rather than sent late. 0 means 50ms; a negative
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

	// Trace holds the functions called as requests go through the
	// Transport: decided, waiting, settled, paused. The zero Trace calls
	// none; Trace.Merge stacks several.
	Trace Trace

	// Thresholds are the fractions of every window's limit whose crossing
	// Trace.Crossed reports, each in (0, 1], e.g. {0.8, 0.95}. nil
	// reports none.
	Thresholds []float64

	// Name names this process in what it writes of its spending for
	// tollgate status (who spends, what waits, what is refused), e.g.
	// "ingest-eu-1". A label, never a secret; each Transport sharing a
	// Redis needs its own (two Transports of one process too, when they
	// spend the same scopes), or their records overwrite each other. ""
	// means the host's name and the process's id, e.g. "web-3/4521".
	// tollgate serve names each upstream's Transport with the upstream's
	// name after the process's.
	Name string

	// Logger, when set, receives a record per refusal (Info), per switch,
	// per upstream quota signal and per request handed to Base later than
	// Transit after its admission (Warn), and per admission (Debug); and,
	// once after New, a record (Warn) for each way the Redis may lose what
	// it counts, naming the setting: a maxmemory-policy that evicts keys,
	// appendonly no (see docs/processes.md). A Redis whose access control
	// denies INFO is not checked.
	Logger *slog.Logger
}

// checkPolicies asks Config.Policy for the policy of every rule in the
// cost table and checks that each can be followed (local: with a FailLocal
// limiter).
func checkPolicies(cfg *Config, local bool) error {
	if cfg.Policy == nil {
		return nil
	}
	spec := cfg.Costs.Spec()
	rules := spec.Rules
	if spec.Default != nil {
		rules = append(rules, *spec.Default)
	}
	for _, r := range rules {
		e := costs.Endpoint{Name: r.Endpoint, Charges: r.Charges, Free: r.Free || r.Continues, Continues: r.Continues, Settle: r.Settle}
		if err := checkPolicy(cfg.Policy(e), len(cfg.Routes) > 0, local); err != nil {
			return configErrorf("endpoint %q: %v", r.Endpoint, err)
		}
	}
	return nil
}

// checkCharges refuses a rule of the cost table whose fixed charge to a
// bucket is more than one of the bucket's limits admits, less its reserve
// (on the shared limiter, for an interactive request): every request of it
// would fail at once. Estimates (charges settled later) are checked too;
// charges a rule's Func computes are known only per request. The first
// limit of a bucket that follows an announced quota is left out: an
// announcement may replace it. A catalog (costs.Spec.Catalog) is not
// checked: it lists endpoints a program may never call.
func checkCharges(cfg *Config, a *limits, upstream map[string][]quota.Limit) error {
	spec := cfg.Costs.Spec()
	if spec.Catalog {
		return nil
	}
	rules := spec.Rules
	if spec.Default != nil {
		rules = append(rules, *spec.Default)
	}
	for i, r := range rules {
		if r.Func != nil || r.Free || r.Continues {
			continue
		}
		for _, ch := range r.Charges {
			b := cfg.Buckets[ch.Bucket]
			for j, l := range upstream[ch.Bucket] {
				if j == 0 && b.Follows != "" {
					continue
				}
				admits := a.enforce(b, l, false, false).Units
				if ch.Units <= admits {
					continue
				}
				rule := fmt.Sprintf("rule %d (%q, endpoint %q)", i, r.Pattern, r.Endpoint)
				if i == len(spec.Rules) {
					rule = fmt.Sprintf("the default rule (endpoint %q)", r.Endpoint)
				}
				return configErrorf("%s charges %d units of bucket %q, more than its limit %v admits (%d after the reserve): every such request would fail",
					rule, ch.Units, ch.Bucket, l, admits)
			}
		}
	}
	return nil
}

// checkPolicy reports why a Transport with routes or not, and a FailLocal
// limiter or not, cannot follow p.
func checkPolicy(p Policy, routes, local bool) error {
	switch {
	case p.OnRefusal < WaitTurn || p.OnRefusal > Shadow:
		return errors.New("unknown OnRefusal action " + p.OnRefusal.String())
	case p.AfterFailover == Shadow:
		return errors.New("AfterFailover cannot be Shadow: a dry run fails over nowhere; make OnRefusal Shadow instead")
	case p.AfterFailover != WaitTurn && p.AfterFailover != Refuse:
		return errors.New("AfterFailover must be WaitTurn or Refuse, not " + p.AfterFailover.String())
	case p.OnRefusal == Failover && !routes:
		return errors.New("the policy fails over, but Config.Routes is empty")
	case p.OnOutage < FailClosed || p.OnOutage > FailLocal:
		return errors.New("unknown OnOutage mode " + p.OnOutage.String())
	case p.OnOutage == FailLocal && !local:
		return errors.New("the policy uses the FailLocal outage mode, but Config.LocalLimiter and LocalShare are not set")
	}
	return nil
}
