// Package quota decides, on Redis, whether a call of some cost may spend a
// shared quota now, later, or not at all.
//
// A [Limiter] keeps, for every scope (a quota pool, such as a Cloud project),
// bucket and window, a weighted sliding log: one entry per admitted call,
// whatever its cost, beside the running sum of the units in the window. One
// Lua script checks and records a call under all of its limits at once, on the
// Redis server's clock, so any number of processes can share one quota and no
// window (T-W, T] ever holds more than its limit. The API follows
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
// Limits are sliding windows ([PerWindow]) or calendar days that reset at
// local midnight ([PerDay]). Every key carries a TTL, so idle scopes vanish.
//
// A Limiter is safe for concurrent use by multiple goroutines. Decisions
// made at the same moment by many goroutines share round trips: they leave
// together in one pipeline while earlier ones are in flight (see
// [WithPipelines]), and each is still decided on its own, in arrival order.
package quota

import (
	"context"
	_ "embed"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed fast.lua
var fastSource string

//go:embed reserve.lua
var reserveSource string

// reserveScript is one script in three files: the common case first, then
// the shared log code, then the general decision.
var reserveScript = redis.NewScript(fastSource + logSource + reserveSource)

// Limiter admits calls against limits kept in Redis. Create one with [New]
// or [NewEmbedded]; it is safe for concurrent use.
type Limiter struct {
	client   redis.UniversalClient
	prefix   string
	clock    func() time.Time // nil: the Redis server's clock
	idPrefix string           // makes entry ids unique across limiters
	seq      atomic.Uint64    // makes them unique within this one
	prepared prepared
	batch    batcher
	calendar calendarArgs
	closed   atomic.Bool
	onClose  func() error // releases what NewEmbedded started
}

// An Option configures a Limiter.
type Option func(*Limiter)

// WithPrefix starts every key with prefix instead of [DefaultPrefix]; limiters
// sharing a quota must use the same prefix. A prefix containing '{' or '}'
// is ignored, since it would move keys off their scope's Cluster slot.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) {
		if !strings.ContainsAny(prefix, "{}") {
			l.prefix = prefix
		}
	}
}

// WithClock makes the limiter decide on the instants now returns instead of
// the Redis server's TIME. Use it for Redis offerings that refuse TIME in
// scripts, and in tests. Every process sharing a quota must then keep a
// good clock: one running ahead makes the others wait for it.
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) { l.clock = now }
}

// New returns a Limiter that keeps its state in client, which may be a
// *redis.Client, a *redis.ClusterClient, a failover client or a Ring.
func New(client redis.UniversalClient, opts ...Option) *Limiter {
	l := &Limiter{
		client:   client,
		prefix:   DefaultPrefix,
		idPrefix: strconv.FormatUint(rand.Uint64()>>16, 36) + ".",
		batch:    batcher{pipelines: DefaultPipelines},
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Close releases what the limiter owns: for a Limiter from [NewEmbedded], the
// in-process Redis and its client. A Limiter from [New] leaves its client
// open; the caller owns it. Calls after Close fail with ErrClosed.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) || l.onClose == nil {
		return nil
	}
	return l.onClose()
}

// Client returns the Redis client the limiter uses.
func (l *Limiter) Client() redis.UniversalClient { return l.client }

// check reports why the limiter cannot run a command now.
func (l *Limiter) check(scope string) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.client == nil {
		return invalid("limiter", "nil redis client")
	}
	if scope == "" {
		return invalid("scope", "empty scope name")
	}
	return nil
}

// Special maxWait values for the reserve script, in µs.
const (
	noBound = -1 // hold at whatever instant the charges fit
	record  = -2 // record at once without checking the limits
)

// Allow decides at once whether the charges may be spent now. When they may,
// the units are recorded and the reservation is OK; otherwise nothing is
// recorded and RetryAfter says when they would fit. An error means no
// decision was made: invalid input (ErrInvalid, ErrCostExceedsLimit) or a
// Redis failure (ErrRedis).
func (l *Limiter) Allow(ctx context.Context, scope string, charges ...Charge) (*Reservation, error) {
	return l.reserve(ctx, scope, 0, charges)
}

// Reserve records the charges at the earliest instant they fit, provided it
// lies no more than maxWait after now (a negative maxWait means no bound), and
// returns a reservation whose Delay says how long to wait before acting. The
// hold counts at once: later callers queue behind it. When the instant lies
// beyond maxWait, nothing is recorded and the reservation is not OK. Call
// Cancel if the call will not be made.
func (l *Limiter) Reserve(ctx context.Context, scope string, maxWait time.Duration, charges ...Charge) (*Reservation, error) {
	wait := int64(noBound)
	if maxWait >= 0 {
		wait = maxWait.Microseconds()
	}
	return l.reserve(ctx, scope, wait, charges)
}

// Wait takes a hold like Reserve and sleeps until it is due. It fails at
// once with a *RefusedError when the charges would not fit before ctx's
// deadline, and when ctx ends while waiting it gives the units back and
// returns ctx.Err().
func (l *Limiter) Wait(ctx context.Context, scope string, charges ...Charge) (*Reservation, error) {
	maxWait := time.Duration(-1)
	if deadline, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(deadline), 0)
	}
	r, err := l.Reserve(ctx, scope, maxWait, charges...)
	if err != nil {
		return nil, err
	}
	if !r.OK() {
		return r, &RefusedError{Scope: scope, RetryAfter: r.RetryAfter()}
	}
	if err := r.Wait(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// Record writes charges that were spent without the limiter's say, e.g.
// while Redis could not be reached, so that they count from now on in every
// window. It checks no limit: the units are spent already, and the limits
// may end up over-full, which later callers then wait out. The entries are
// dated now, or after the newest hold, so they count at least as long as
// the spending they stand for.
func (l *Limiter) Record(ctx context.Context, scope string, charges ...Charge) (*Reservation, error) {
	return l.reserve(ctx, scope, record, charges)
}

// reserve runs the reserve script with maxWait in µs: 0 asks for an
// immediate decision, noBound for a hold at any instant, record to record
// without checking.
func (l *Limiter) reserve(ctx context.Context, scope string, maxWait int64, charges []Charge) (*Reservation, error) {
	if err := l.check(scope); err != nil {
		return nil, err
	}
	if len(charges) == 0 {
		return nil, invalid("charges", "none given")
	}
	n := 0
	for i, c := range charges {
		if err := c.validate(); err != nil {
			return nil, err
		}
		for j, lim := range c.Limits {
			n++
			if dup := duplicateWindow(charges, i, j); dup {
				return nil, invalid("charges", "bucket "+strconv.Quote(c.Bucket)+" names window "+lim.windowKey()+" twice")
			}
		}
	}
	now, clockArg := l.clockArg()
	seq := l.seq.Add(1)

	// KEYS: meta and sum per window, the pause of each bucket, the scope's
	// pause, then the log per window. ARGV: clock, maxwait, entry id, then
	// per window: cost, room (units less cost), span.
	keys := make([]string, 0, 3*n+len(charges)+1)
	var logs [4]string // the windows' logs; more windows spill to the heap
	windowLogs := logs[:0]
	args := make([]any, 0, 3+3*n)
	args = append(args, clockArg, maxWait, l.entryID(seq))
	var scopePause string
	var pauses [4]string // the buckets' pause keys; more charges spill to the heap
	bucketPauses := pauses[:0]
	for _, c := range charges {
		for j, lim := range c.Limits {
			w := l.window(scope, c.Bucket, lim)
			if j == 0 {
				bucketPauses = append(bucketPauses, w.pause)
			}
			keys = append(keys, w.meta, w.sum)
			windowLogs = append(windowLogs, w.log)
			args = append(args, c.Cost, lim.Units-c.Cost, l.span(w, lim, &now))
			scopePause = w.scopePause
		}
	}
	keys = append(keys, bucketPauses...)
	keys = append(keys, scopePause)
	keys = append(keys, windowLogs...)

	reply, late, err := l.runReserve(ctx, keys, args)
	if late != nil {
		// The caller gave up while the decision was on its way: give back
		// what it may admit, so that no units go to a call never made.
		go func() {
			<-late.done
			if r, err := l.reservation(scope, charges, seq, late.reply); err == nil && r.ok {
				_ = r.Cancel(context.Background())
			}
		}()
	}
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	r, err := l.reservation(scope, charges, seq, reply)
	if err != nil {
		return nil, err
	}
	if r.ok && r.at > r.now {
		r.decided = time.Now() // a hold: Wait sleeps from here
	}
	return r, nil
}

// reservation reads the reserve script's reply: fast.lua's string or
// reserve.lua's list.
func (l *Limiter) reservation(scope string, charges []Charge, seq uint64, reply any) (*Reservation, error) {
	r := &Reservation{lim: l, scope: scope, charges: charges, seq: seq}
	var err error
	if fast, ok := reply.(string); ok {
		err = r.readFast(fast)
	} else {
		err = r.readDecision(reply)
	}
	if err != nil {
		return nil, &RedisError{Op: "reserve", Err: err}
	}
	return r, nil
}

// entryID is the id of the log entries of the seq-th reservation.
func (l *Limiter) entryID(seq uint64) string {
	return l.idPrefix + strconv.FormatUint(seq, 36)
}

// duplicateWindow reports whether the j-th limit of the i-th charge names a
// bucket window that an earlier one already named.
func duplicateWindow(charges []Charge, i, j int) bool {
	c, w := charges[i], charges[i].Limits[j]
	for k := 0; k <= i; k++ {
		if charges[k].Bucket != c.Bucket {
			continue
		}
		for m, lim := range charges[k].Limits {
			if (k < i || m < j) && lim.sameWindow(w) {
				return true
			}
		}
	}
	return false
}

// Ping checks that the Redis node holding scope's keys answers: on a
// cluster, the master of the scope's slot; otherwise the server. On a
// cluster it first asks the client to reload its slot map (in the
// background), so that after a failover a later Ping finds the replica that
// took over: go-redis otherwise keeps a dead master's slots until its
// ClusterStateReloadInterval passes.
func (l *Limiter) Ping(ctx context.Context, scope string) error {
	if err := l.check(scope); err != nil {
		return err
	}
	var err error
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
		var node *redis.Client
		if node, err = cc.MasterForKey(ctx, l.scopeKey(scope)); err == nil {
			err = node.Ping(ctx).Err()
		}
	} else {
		err = l.client.Ping(ctx).Err()
	}
	if err != nil {
		return redisError(ctx, "ping", err)
	}
	return nil
}
