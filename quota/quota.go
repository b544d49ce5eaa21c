// Package quota decides, on Redis, whether a call of some cost may spend a
// shared quota now, later, or not at all.
//
// Begin with [New], on any Redis client (package quota/embedded runs one
// in-process, for a single process), then [Limiter.Allow],
// [Limiter.Reserve] or [Limiter.Wait] with what the call asks of each
// bucket (a [Demand]); the package's Example is whole. Most programs never call a Limiter themselves: they hand it to
// tollgate.New, or let a provider's NewTransport (providers/youtube,
// providers/github, providers/openai, providers/gemini,
// providers/anthropic) make one, and the Transport asks it for every
// request.
//
// A [Limiter] keeps, for every scope (a quota pool, such as a Cloud project),
// bucket and window, a weighted sliding log beside the running sum of the
// units in the window. The log counts calls by slices of the window (a
// thousandth of it, no finer than a millisecond): the calls of one slice
// make one entry, dated at the latest of them, whatever their number and
// cost, so a window's memory and work are bounded by its thousand slices
// and each call counts for at least a whole window. One Lua script checks
// and records a call under all of its limits at once, on the Redis server's
// clock, so any number of processes can share one quota and no window
// (T-W, T] ever holds more than its limit. The API follows
// golang.org/x/time/rate in spirit:
//
//   - [Limiter.Allow] decides at once: admitted now, or refused with the
//     exact time after which the cost would fit.
//   - [Limiter.Reserve] may take a hold: an entry dated at the earliest
//     instant the cost fits, after every hold already waiting, so waiters in
//     all processes are served first come, first served with no polling, and
//     an expensive call is never starved by a stream of cheap ones.
//   - [Limiter.Wait] takes a hold and sleeps until it is due, giving the
//     units back if its context ends first.
//
// Limits are sliding windows ([PerWindow]), fixed windows that end at a
// reset the upstream announces ([PerFixedWindow]), calendar days that
// reset at local midnight ([PerDay]), or token buckets that refill
// continuously ([TokenBucket]). Every key carries a TTL, so idle
// scopes vanish. [Limiter.Record] counts units spent without a decision,
// [Limiter.Pause] stops a bucket or scope for a while, [Limiter.Lease]
// hands a process a block of units to spend without a round trip,
// [Limiter.TakeSlot] caps calls in flight ([Limiter.ReserveCapped] takes
// the slots with a decision's units), [Limiter.Announce] holds the
// count to what the upstream announces, and [Limiter.Usage] reads what is
// spent. A context marked [WithPriority] Background yields to interactive
// calls. A demand's [Pace] spreads its calendar days and fixed windows
// over their length, and its [Shares] divide them among tenants
// (Demand.Tenant), in the same atomic decision.
//
// What only operators' tools call (a survey of what Redis holds, what is
// under way in a bucket, its description, lifting pauses, and waiting
// until every process listening has applied them) is package quota/ops's,
// on the same Limiter.
//
// # Redis format
//
// What a Limiter keeps in Redis has a format number, 3 for this version:
// per window a meta (the sum, the open slice, the leases, the pause) and a
// log of closed slices. Every change to the keys or their encoding bumps
// it. Format 3 reads the state of formats 2 and 1 exactly and rewrites
// each window in its own format when it next writes it; a process meeting
// state it cannot read exactly refuses with [ErrFormat] rather than
// misreading it. Give a new format its own prefix ([WithPrefix]) to run it
// beside the old, or upgrade every process sharing a prefix together
// (docs/redis-format.md in the repository).
//
// A Limiter is safe for concurrent use by multiple goroutines. Decisions
// made at the same moment by many goroutines share round trips: they leave
// together in one pipeline while earlier ones are in flight (see
// [WithPipelines]), and each is still decided on its own, in arrival order.
//
// # go-redis's log
//
// go-redis writes log lines of its own to stderr ("pool.go:762: redis:
// connection pool: failed to dial ..."), through a logger that is global
// to the process: when Redis is unreachable they come before, and
// repeat, the one error tollgate returns. Importing this package routes
// them through [log/slog]'s default logger at [log/slog.LevelDebug] instead:
// hidden unless the program logs debug lines. It is done once, when the
// package is initialized, so that a program that chooses otherwise wins:
// call redis.SetLogger in main (or in an init of a package that imports
// this one).
package quota

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter admits calls against limits kept in Redis. Create one with [New];
// it is safe for concurrent use, and holds nothing that needs closing.
type Limiter struct {
	client   redis.UniversalClient
	prefix   string
	clock    func() time.Time // nil: the Redis server's clock
	idPrefix string           // makes entry ids unique across limiters
	seq      atomic.Uint64    // makes them unique within this one
	prepared prepared
	batch    batcher
	calendar calendarArgs
	keeper   keeper   // renews the slots held
	watchers watchers // wakes the callers waiting for a slot
	told     toldIDs  // the notices told while ops' Confirm waits for them
	replicas replicas // how many must have each write (WithReplicas)
}

// An Option configures a Limiter; New reports the first option it cannot
// use.
type Option func(*Limiter) error

// WithPrefix starts every key with prefix instead of [DefaultPrefix];
// limiters sharing a quota must use the same prefix, and applications
// sharing a Redis should each use their own. A prefix may not contain '{'
// or '}', which would move keys off their scope's Cluster slot.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) error {
		if strings.ContainsAny(prefix, "{}") {
			return invalid(fmt.Sprintf("prefix %q", prefix), "must not contain '{' or '}'")
		}
		l.prefix = prefix
		return nil
	}
}

// WithClock makes the limiter decide on the instants now returns instead of
// the Redis server's TIME. Use it for Redis offerings that refuse TIME in
// scripts, and in tests. Every process sharing a quota must then keep a
// good clock: one running ahead makes the others wait for it.
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) error {
		if now == nil {
			return invalid("clock", "nil func")
		}
		l.clock = now
		return nil
	}
}

// New returns a Limiter that keeps its state in client, which may be a
// *redis.Client, a *redis.ClusterClient, a failover client or a Ring. For
// a single process with no Redis of its own, package quota/embedded runs
// one in-process. New fails on a nil client (typed nil included) and on
// an option it cannot use; it does not contact Redis.
func New(client redis.UniversalClient, opts ...Option) (*Limiter, error) {
	if isNil(client) {
		return nil, invalid("redis client", "nil")
	}
	l := &Limiter{
		client:   client,
		prefix:   DefaultPrefix,
		idPrefix: strconv.FormatUint(rand.Uint64()>>16, 36) + ".",
		batch:    batcher{pipelines: defaultPipelines},
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	if err := l.replicasByDefault(); err != nil {
		return nil, err
	}
	return l, nil
}

// isNil reports whether c is nil or an interface holding a nil pointer,
// which go-redis would dereference on the first command.
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// check reports why the limiter cannot run a command for scope.
func (l *Limiter) check(scope string) error {
	if scope == "" {
		return invalid("scope", "empty scope name")
	}
	return nil
}
