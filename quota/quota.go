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
	"context"
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

// unbounded is the maxwait of a hold that may lie at any instant: further
// than any calendar a decision is sent, so the limits alone decide.
const unbounded = int64(1) << 53

// Allow decides at once whether the demands' units may be spent now. When
// they may, the units are recorded and the reservation is OK; otherwise
// nothing is recorded and RetryAfter says when they would fit. An error means no
// decision was made: invalid input (ErrInvalid, ErrCostExceedsLimit), a
// Redis failure (ErrRedis), or state of another Redis format (ErrFormat).
func (l *Limiter) Allow(ctx context.Context, scope string, demands ...Demand) (*Reservation, error) {
	return l.reserve(ctx, scope, 0, demands)
}

// Reserve records the demands at the earliest instant they fit, provided it
// lies no more than maxWait after now (a negative maxWait means no bound), and
// returns a reservation whose Delay says how long to wait before acting. The
// hold counts at once: later callers queue behind it. When the instant lies
// beyond maxWait, nothing is recorded and the reservation is not OK. Call
// Cancel if the call will not be made.
//
// A Background call (see WithPriority) never takes a hold, so that an
// interactive call arriving later can still be admitted first: Reserve
// waits its turn in the scope's background room, up to maxWait, and
// returns it admitted now, or refused. On a bucket with Shares, a call of
// a tenant at or above its share never holds either, so that a tenant
// below its share goes first: it waits its turn in the bucket's room
// likewise (see Shares), as does a Background call there.
func (l *Limiter) Reserve(ctx context.Context, scope string, maxWait time.Duration, demands ...Demand) (*Reservation, error) {
	wait := unbounded
	if maxWait >= 0 {
		wait = maxWait.Microseconds()
	}
	return l.reserve(ctx, scope, wait, demands)
}

// Wait takes a hold like Reserve and sleeps until it is due. It fails at
// once with a *RefusedError when the demands would not fit before ctx's
// deadline, and when ctx ends while waiting it gives the units back and
// returns ctx.Err().
func (l *Limiter) Wait(ctx context.Context, scope string, demands ...Demand) (*Reservation, error) {
	maxWait := time.Duration(-1)
	if deadline, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(deadline), 0)
	}
	r, err := l.Reserve(ctx, scope, maxWait, demands...)
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

// Record writes the units of demands spent without the limiter's say, e.g.
// while Redis could not be reached, or by a program outside tollgate, so
// that they count from now on in every window. It checks no limit: the
// units are spent already, and the limits may end up over-full, which
// later callers then wait out. The entries are dated now, or after the
// newest hold, so they count at least as long as the spending they stand
// for.
func (l *Limiter) Record(ctx context.Context, scope string, demands ...Demand) error {
	n, err := l.checkCharges(scope, demands)
	if err != nil {
		return err
	}
	now, clockArg := l.clockArg()
	keys := make([]string, 0, 2*n)
	logs := make([]string, 0, n)
	args := make([]any, 0, 1+2*n)
	args = append(args, clockArg)
	for _, c := range demands {
		for _, lim := range c.Limits {
			w := l.window(scope, c.Bucket, lim)
			keys = append(keys, w.meta)
			logs = append(logs, w.log)
			args = append(args, c.Units, l.span(w, lim, &now))
		}
	}
	keys = append(keys, logs...)
	if err := l.write(ctx, recordScript, keys, args...).Err(); err != nil {
		return redisError(ctx, "record", err)
	}
	return nil
}

// checkCharges validates a decision's scope and charges, and returns how
// many windows they name.
func (l *Limiter) checkCharges(scope string, charges []Demand) (int, error) {
	if err := l.check(scope); err != nil {
		return 0, err
	}
	if len(charges) == 0 {
		return 0, invalid("charges", "none given")
	}
	n := 0
	for i, c := range charges {
		if err := c.validate(); err != nil {
			return 0, err
		}
		for j, lim := range c.Limits {
			n++
			if duplicateWindow(charges, i, j) {
				return 0, invalid("charges", "bucket "+strconv.Quote(c.Bucket)+" names window "+lim.windowKey()+" twice")
			}
		}
	}
	return n, nil
}

// reserve runs the reserve script with maxWait in µs: 0 asks for an
// immediate decision. A background call (see WithPriority) is decided in
// its scope's background room instead.
func (l *Limiter) reserve(ctx context.Context, scope string, maxWait int64, charges []Demand) (*Reservation, error) {
	if isFair(charges) {
		return l.fairReserve(ctx, scope, maxWait, charges)
	}
	if priorityOf(ctx) == Background {
		return l.background(ctx, scope, maxWait, charges)
	}
	keys, args, seq, err := l.decision(scope, maxWait, charges, false)
	if err != nil {
		return nil, err
	}
	return l.decide(ctx, reserveScript, scope, charges, seq, withoutBucketLogs(keys, charges), args)
}

// withoutBucketLogs returns the reserve script's keys from decision's
// (the metas, then the logs) less the logs when every window is a token
// bucket's, which keeps none: each key sent is a string Redis makes for
// the script, and the common decision on buckets reads only the metas.
// Scripts that find keys by place after the logs (fairreserve.lua) take
// decision's keys whole.
func withoutBucketLogs(keys []string, charges []Demand) []string {
	for _, c := range charges {
		for _, lim := range c.Limits {
			if !lim.refilling() {
				return keys
			}
		}
	}
	return keys[:len(keys)/2]
}

// decide runs a reserve script (reserveScript, fairScript) on keys and
// args and returns the reservation its reply makes, its entries named by
// seq.
func (l *Limiter) decide(ctx context.Context, script *redis.Script, scope string, charges []Demand, seq uint64, keys []string, args []any) (*Reservation, error) {
	reply, late, err := l.runScript(ctx, script, keys, args)
	l.giveBackLate(late, scope, charges, seq, nil)
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	return l.decided(scope, charges, seq, reply)
}

// giveBackLate gives back, when it comes, what a decision whose caller
// gave up while it was on its way admits (its units, and slots taken with
// them), so that nothing goes to a call never made. late is runScript's.
func (l *Limiter) giveBackLate(late *decision, scope string, charges []Demand, seq uint64, slots []*Slot) {
	if late == nil {
		return
	}
	go func() {
		<-late.done
		if r, err := l.reservation(scope, charges, seq, late.reply); err == nil && r.ok {
			_ = r.Cancel(context.Background())
			for _, s := range slots {
				_ = s.Release(context.Background())
			}
		}
	}()
}

// decided reads a decision's reply into its reservation.
func (l *Limiter) decided(scope string, charges []Demand, seq uint64, reply any) (*Reservation, error) {
	r, err := l.reservation(scope, charges, seq, reply)
	if err != nil {
		return nil, err
	}
	if r.ok && r.at > r.now {
		r.decided = time.Now() // a hold: Wait sleeps from here
	}
	return r, nil
}

// decision checks a decision's input and builds the reserve script's keys
// and arguments, and the sequence number its entries are named by. Named,
// for the background script, it names the decision (entryID) and lists
// the pauses among the keys; otherwise, for the reserve script, which
// names the pauses after the metas, the id's place says where each
// charge's windows start when there are several.
func (l *Limiter) decision(scope string, maxWait int64, charges []Demand, named bool) (keys []string, args []any, seq uint64, err error) {
	n, err := l.checkCharges(scope, charges)
	if err != nil {
		return nil, nil, 0, err
	}
	now, clockArg := l.clockArg()
	d := decision{seq: l.seq.Add(1)}

	// KEYS: the meta per window, (named:) the pause of each bucket and
	// the scope's pause, then the log per window (withoutBucketLogs
	// drops them for the reserve script). ARGV: clock, maxwait,
	// id or where the charges start, then per window: units, room (the
	// limit less units), span.
	d.keys = make([]string, 0, 2*n+len(charges)+1)
	var logs [4]string // the windows' logs; more windows spill to the heap
	windowLogs := logs[:0]
	d.args = make([]any, 0, 3+3*n)
	var id string
	switch {
	case named:
		id = l.entryID(d.seq)
	case len(charges) > 1:
		var b strings.Builder
		first := 1
		for i, c := range charges {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(first))
			first += len(c.Limits)
		}
		id = b.String()
	}
	d.args = append(d.args, clockArg, maxWait, id)
	var scopePause string
	var pauses [4]string // the buckets' pause keys; more charges spill to the heap
	bucketPauses := pauses[:0]
	for _, c := range charges {
		for j, lim := range c.Limits {
			w := l.window(scope, c.Bucket, lim)
			if j == 0 {
				bucketPauses = append(bucketPauses, w.pause)
			}
			d.keys = append(d.keys, w.meta)
			windowLogs = append(windowLogs, w.log)
			d.args = append(d.args, c.Units, lim.Units-c.Units, l.span(w, lim, &now))
			scopePause = w.scopePause
		}
	}
	if named {
		d.keys = append(d.keys, bucketPauses...)
		d.keys = append(d.keys, scopePause)
	}
	d.keys = append(d.keys, windowLogs...)
	return d.keys, d.args, d.seq, nil
}

// reservation reads the reserve script's reply: fast.lua's string or
// reserve.lua's list.
func (l *Limiter) reservation(scope string, charges []Demand, seq uint64, reply any) (*Reservation, error) {
	r := &Reservation{lim: l, scope: scope, charges: charges, seq: seq, reply: reply}
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
func duplicateWindow(charges []Demand, i, j int) bool {
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
			err = l.ping(ctx, node)
		}
	} else {
		err = l.ping(ctx, l.client)
	}
	if err != nil {
		return redisError(ctx, "ping", err)
	}
	return nil
}
