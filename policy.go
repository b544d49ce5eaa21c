package tollgate

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// defaultMaxWait bounds how long the WaitTurn action lets a request wait
// for its turn when the Policy does not say.
const defaultMaxWait = time.Minute

// An Action is what the Transport does with a request its quota has no room
// for now.
type Action int

const (
	// WaitTurn takes a hold on the quota and sleeps until it is due, if
	// that is within the Policy's MaxWait and the request context's
	// deadline; otherwise it fails at once with a *QuotaError.
	WaitTurn Action = iota
	// Refuse fails at once with a *QuotaError carrying RetryAfter.
	Refuse
	// Failover tries the Config's Routes in order, and when every one is
	// spent does what the Policy's AfterFailover says.
	Failover
	// Shadow sends the request anyway, at once, and reports what it
	// would have been refused for (Trace.WouldRefuse, Decision.Shadow,
	// and tollgate status's refusals as "would-refuse"): a dry run, for
	// putting tollgate in front of a fleet that already runs. The request
	// is charged and counted as usual; units it is sent without room for
	// are recorded in the windows all the same (the upstream spends
	// them), so that other endpoints see the quota as it is. A pause (an
	// operator's, or an upstream's answer) still refuses it, as it would
	// any request; a Shadow request never waits. See docs/policies.md.
	Shadow
)

// String returns the action's name, e.g. "wait-turn".
func (a Action) String() string {
	switch a {
	case WaitTurn:
		return "wait-turn"
	case Refuse:
		return "refuse"
	case Failover:
		return "failover"
	case Shadow:
		return "shadow"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// An Outage is what the Transport does with a request while Redis cannot be
// reached.
type Outage int

const (
	// FailClosed sends nothing and fails with an *UnavailableError.
	FailClosed Outage = iota
	// FailOpen sends the request unmetered. Trace.Decided reports it,
	// and its units are recorded in Redis once Redis answers again.
	FailOpen
	// FailLocal decides on the Config's LocalLimiter, holding its
	// LocalShare of every limit (e.g. 1/8 for eight instances). Its
	// spending is recorded in Redis once Redis answers again.
	FailLocal
)

// String returns the mode's name, e.g. "fail-local".
func (o Outage) String() string {
	switch o {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailLocal:
		return "fail-local"
	}
	return "outage(" + strconv.Itoa(int(o)) + ")"
}

// A Policy says what the Transport does with an endpoint's requests. The
// zero Policy waits up to a minute and fails closed.
type Policy struct {
	// OnRefusal applies when the quota has no room now.
	OnRefusal Action
	// AfterFailover applies when OnRefusal is Failover and every route is
	// spent: WaitTurn (on the request's own scope) or Refuse.
	AfterFailover Action
	// MaxWait bounds the wait for a turn: 0 means a minute, a
	// negative value no bound but the request context's deadline. It does
	// not bound the decision's own round trip to Redis (the context's
	// deadline does): a request with room now is admitted whatever its
	// MaxWait, e.g. 1ns waits for nothing but sends what fits.
	MaxWait time.Duration
	// OnOutage applies while Redis cannot be reached.
	OnOutage Outage
	// Priority is the endpoint's requests' priority (quota.Interactive,
	// the default, or quota.Background); a request whose context carries
	// quota.Background (quota.WithPriority) is background too. Background
	// requests (backfills, batch jobs) may spend only
	// Config.BackgroundShare of each limit, wait in arrival order behind
	// every interactive request, and are never starved while their share
	// has room.
	Priority quota.Priority
}

// waitLimit is how long a request with this policy may wait for its turn,
// or a negative value for no bound but the context's deadline.
func (p Policy) waitLimit() time.Duration {
	if p.MaxWait == 0 {
		return defaultMaxWait
	}
	return p.MaxWait
}

// Policies returns a Config.Policy that applies byEndpoint[name] to the
// endpoint of that name and def to the others.
func Policies(def Policy, byEndpoint map[string]Policy) func(endpoint costs.Endpoint) Policy {
	return func(e costs.Endpoint) Policy {
		if p, ok := byEndpoint[e.Name]; ok {
			return p
		}
		return def
	}
}
