package tollgate

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/costs"
)

// A Mode is how a decision was made.
type Mode int

const (
	// ModeRedis: by the shared limiter in Redis.
	ModeRedis Mode = iota
	// ModeLocal: by the in-process limiter of the Local outage mode.
	ModeLocal
	// ModeOpen: not at all; Redis was down and the endpoint fails open, so
	// the request was sent unmetered.
	ModeOpen
	// ModeClosed: not at all; Redis was down and the endpoint fails closed,
	// so the request was not sent.
	ModeClosed
)

func (m Mode) String() string {
	switch m {
	case ModeRedis:
		return "redis"
	case ModeLocal:
		return "local"
	case ModeOpen:
		return "open"
	case ModeClosed:
		return "closed"
	}
	return "mode(?)"
}

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
	// Charges are the units asked of each bucket, e.g. [{pool 100}].
	Charges []costs.Charge
	// Admitted reports that the request may be sent (now, or after Waited).
	Admitted bool
	// Waited is how long the request waited for its turn, e.g. 1.5s.
	Waited time.Duration
	// At is the instant the units count from, on the limiter's clock (the
	// Redis server's), or for units spent from a lease the local instant
	// they were spent: the request is sent at it or just after. Zero when
	// nothing was reserved (refused, or sent unmetered).
	At time.Time
	// RetryAfter is, for a refusal, how long until the cost fits, e.g. 41s.
	RetryAfter time.Duration
	// Mode is how the decision was made: Redis, local, or not at all
	// because Redis was down (open: sent unmetered; closed: not sent).
	Mode Mode
	// Cached reports a refusal made in this process without asking Redis,
	// because Redis had refused as much until RetryAfter (Error policy).
	Cached bool
	// Leased reports units spent from this process's lease (see
	// Transport.Lease), without a round trip.
	Leased bool
	// Err is why the request was not sent, when it was not.
	Err error
}

// A DecisionHook is called once per request, after the decision and any
// wait, before the request is sent (or instead, when it is not). It runs on
// the request's goroutine: keep it quick, and safe for concurrent use.
type DecisionHook func(ctx context.Context, d Decision)

// A Switch reports that the Transport's view of Redis changed.
type Switch struct {
	// Up is true when Redis answers again and decisions return to it,
	// false when it failed and endpoints fall back on their Outage mode.
	Up bool
	// Err is the failure, when Up is false.
	Err error
}

// A SwitchHook is called on every switch between Redis and the outage
// modes, on the goroutine of the request that noticed it.
type SwitchHook func(s Switch)
