// Package spend keeps what each process spends, what waits and what is
// refused, and writes it to Redis off the request's path, for operators'
// tools to show who spends a shared quota.
//
// A Transport owns one Recorder. The request's path tells it, in calls
// that take a shared read lock (a wait, its key's own mutex too), add to
// an atomic counter and allocate nothing once a (scope, bucket, endpoint,
// caller) has been seen (BenchmarkRequestPath: some 40-55 ns, 0 allocs):
//
//	r.Spend(scope, bucket, endpoint, caller, units)   units charged (negative: a refund)
//	r.Refuse(scope, bucket, endpoint, caller, cause)  a request refused, and why
//	w := r.BeginWait(scope, bucket, caller, now)      a request starts waiting for its turn
//	w.End()                                           ... and stops, sent or not
//
// Run (or Flush, which Run calls) writes each scope's record at most once
// per Interval, and writes nothing at all while the process is idle:
// nothing spent or refused since the last write, and nothing waiting.
// Read, ReadAll and Summarize give operators' tools every live process's
// record.
//
// # What a record says
//
// "Current" is the trailing Span (a minute unless Options say otherwise)
// that ends at the record's instant: a record tells the units spent and the
// requests refused in that span, per bucket, endpoint and caller, give or
// take one Interval at its far end (the counts are kept per flush); and
// the requests waiting at its instant, per bucket and caller, with the
// instant the oldest of them began to wait. Units per second now are
// Units / Span. A record's waiting requests count TTL (three Intervals
// by default) after its instant, and the record itself, what was spent
// and refused, a Span: a process that stops (Close writes what it spent
// since its last write) or goes idle is still among those that spent in
// the span, and its waits are not shown once it has stopped writing.
//
// Instants are the writer's clock (the now given to Flush, BeginWait and
// Read), in milliseconds: hosts' clocks are taken to agree within a second
// or so, as NTP keeps them. Redis's own TTL on each record is the backstop.
//
// # Keys
//
// For a scope S (spelled by keypart.Of, as quota spells it: a long or
// odd name, such as a hashed credential's, is a hash) and a process P:
//
//	<prefix>{S}:spenders     a sorted set of the processes that wrote a record, each keypart.Of(P),
//	                         scored by the instant (ms) its record goes stale; writers prune it
//	<prefix>{S}:spender.<P>  the process's record: JSON, versioned (see Report), with a TTL
//
// Both share the scope's {hash tag}, so that a scope's write is one script
// call on one Redis Cluster slot. They use only commands the README's ACL
// line already grants (SET, ZADD, ZREMRANGEBYSCORE, PTTL, PEXPIRE, ZREM,
// DEL, ZRANGE, MGET; SCAN for ReadAll, as the operators' line grants).
// Neither key is read by a decision. quota's Survey (and older tools)
// skip them: nothing after the scope's "}:" has a colon.
//
// Records carry names only (scopes, buckets, endpoints, callers,
// processes), never a key or token: a credential's scope is named by its
// hash already (tollgate.HashCredential), and a caller's name is a label.
package spend

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keypart"
	"github.com/tollgate/tollgate/quota"
)

// A Cause says why a request was refused, as records spell it. The
// causes are strings, so that a reader keeps a cause a later version
// adds (and a record names) without knowing it.
type Cause string

// The causes of refusals.
const (
	NoRoom        Cause = "no-room"        // the shared count had no room (tollgate.NoRoom)
	UpstreamPause Cause = "upstream-pause" // an upstream's pause (tollgate.PausedByUpstream)
	OperatorPause Cause = "operator-pause" // an operator's pause (tollgate.PausedByOperator)
	CapFull       Cause = "cap"            // a cap on requests in flight (tollgate.CapFull)
	RedisDown     Cause = "redis-down"     // Redis down, the local share spent (tollgate.RedisDown)
	// WouldRefuse: a request shadow mode sent that would have been
	// refused.
	WouldRefuse Cause = "would-refuse"
)

// Defaults of Options.
const (
	DefaultInterval = 5 * time.Second
	DefaultSpan     = time.Minute
)

// Options configure a Recorder. Process is required.
type Options struct {
	// Process names this process in the records, e.g. DefaultProcess():
	// two processes of one name overwrite each other's records. It is a
	// label, never a secret.
	Process string
	// Prefix starts the keys, as the limiter's (quota.WithPrefix); ""
	// means quota.DefaultPrefix.
	Prefix string
	// Interval is the least time between two writes of the process;
	// 0 means DefaultInterval.
	Interval time.Duration
	// Span is how far back a record counts what was spent and refused;
	// 0 means DefaultSpan. At least Interval.
	Span time.Duration
	// TTL is how long after its instant a record tells the requests
	// waiting, the writer being taken for gone after it; 0 means three
	// Intervals. At least Interval. The record itself, what was spent
	// and refused, lives the longer of TTL and Span: a process that
	// stopped is still among those that spent in the span.
	TTL time.Duration
	// OnError, when not nil, is told of each failed write by Run, on
	// Run's goroutine. The counts are kept and written at the next
	// write that succeeds.
	OnError func(error)
}

// DefaultProcess names this process by its host and id, e.g. "web-3/4521".
func DefaultProcess() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// A Recorder keeps what one process spends, refuses and has waiting, and
// writes it to Redis (Run, Flush). It is safe for concurrent use. A nil
// *Recorder records nothing: its methods do nothing.
type Recorder struct {
	client                  redis.UniversalClient
	process, member, prefix string
	interval, span, ttl     time.Duration
	onError                 func(error)

	mu      sync.RWMutex // guards the maps; the request's path takes it to read
	spent   map[spendKey]*counter
	refused map[refuseKey]*counter
	waits   map[waitKey]*waitCell

	flushing sync.Mutex // serializes Flush, Close and Leave; guards what follows
	last     time.Time  // the instant of the last write
	failed   map[string]bool
	written  map[string]bool // scopes whose record this process wrote
}

type spendKey struct{ scope, bucket, endpoint, caller string }

type refuseKey struct {
	scope, bucket, endpoint, caller string
	cause                           Cause
}

type waitKey struct{ scope, bucket, caller string }

// A counter counts units or refusals: pending since the last flush (the
// request's path adds to it), then per flush in ring (the flusher's alone).
type counter struct {
	pending atomic.Int64
	ring    []mark
}

// A mark is what one flush moved out of pending: n at the instant at (ms).
type mark struct{ at, n int64 }

// A waitCell holds the start instants of the requests waiting on one
// (scope, bucket, caller): starts[i] is 0 when the place is free, and free
// lists the free places.
type waitCell struct {
	mu     sync.Mutex
	starts []int64 // Unix ms
	free   []int32
	n      int
	// shown is what the last write of the scope told: requests and
	// oldest (the flusher's alone).
	shownN      int
	shownOldest int64
	// idleSince is the first flush (Unix ms) that found none waiting
	// since one last did, 0 while some wait (the flusher's alone).
	idleSince int64
}

// kept is how long a record lives after its instant: until its counts
// have left the span.
func (r *Recorder) kept() time.Duration { return max(r.ttl, r.span) }

// New returns a Recorder writing through client under opts. It starts
// nothing: call Run on a goroutine of your own.
func New(client redis.UniversalClient, opts Options) (*Recorder, error) {
	if client == nil {
		return nil, errors.New("spend: a nil Redis client")
	}
	if opts.Process == "" {
		return nil, errors.New("spend: no process name")
	}
	if len(opts.Process) > 256 {
		return nil, errors.New("spend: a process name longer than 256 bytes")
	}
	if opts.Prefix == "" {
		opts.Prefix = quota.DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, errors.New("spend: a prefix with a brace")
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Span == 0 {
		opts.Span = max(DefaultSpan, opts.Interval)
	}
	if opts.TTL == 0 {
		opts.TTL = 3 * opts.Interval
	}
	switch {
	case opts.Interval < time.Millisecond:
		return nil, errors.New("spend: an interval under a millisecond")
	case opts.Span < opts.Interval:
		return nil, errors.New("spend: a span shorter than the interval")
	case opts.TTL < opts.Interval:
		return nil, errors.New("spend: a TTL shorter than the interval")
	}
	return &Recorder{
		client: client, process: opts.Process, member: keypart.Of(opts.Process), prefix: opts.Prefix,
		interval: opts.Interval, span: opts.Span, ttl: opts.TTL, onError: opts.OnError,
		spent:   map[spendKey]*counter{},
		refused: map[refuseKey]*counter{},
		waits:   map[waitKey]*waitCell{},
		failed:  map[string]bool{},
		written: map[string]bool{},
	}, nil
}

// Process returns the name the records carry.
func (r *Recorder) Process() string { return r.process }

// Spend counts units charged to bucket of scope for a request to endpoint
// made for caller ("" when none is named). Call it once per bucket a
// request is charged to; a settlement's correction is units too, negative
// for a refund.
func (r *Recorder) Spend(scope, bucket, endpoint, caller string, units int64) {
	if r == nil || units == 0 {
		return
	}
	add(&r.mu, r.spent, spendKey{scope, bucket, endpoint, caller}, units)
}

// Refuse counts one request to endpoint refused for cause: bucket is the
// bucket that had no room or was paused, "" for a pause of the whole
// scope.
func (r *Recorder) Refuse(scope, bucket, endpoint, caller string, cause Cause) {
	if r == nil {
		return
	}
	add(&r.mu, r.refused, refuseKey{scope, bucket, endpoint, caller, cause}, 1)
}

// add adds n to m's counter for k, made on first use. A key seen before
// takes the read lock only and allocates nothing; the add happens under
// the lock, so that a flush dropping idle counters never loses it.
func add[K comparable](mu *sync.RWMutex, m map[K]*counter, k K, n int64) {
	mu.RLock()
	if c := m[k]; c != nil {
		c.pending.Add(n)
		mu.RUnlock()
		return
	}
	mu.RUnlock()
	mu.Lock()
	c := m[k]
	if c == nil {
		c = &counter{}
		m[k] = c
	}
	c.pending.Add(n)
	mu.Unlock()
}

// A Wait is one request's wait, from BeginWait to End. Its zero value
// (from a nil Recorder) ends nothing.
type Wait struct {
	c *waitCell
	i int32
}

// BeginWait counts a request of caller waiting for its turn in bucket of
// scope since now; the request calls End on what it returns once it stops
// waiting, whether it is sent, refused or cancelled. A request that waits
// on several buckets begins a wait on each.
func (r *Recorder) BeginWait(scope, bucket, caller string, now time.Time) Wait {
	if r == nil {
		return Wait{}
	}
	k := waitKey{scope, bucket, caller}
	r.mu.RLock()
	c := r.waits[k]
	if c != nil {
		w := c.begin(now)
		r.mu.RUnlock()
		return w
	}
	r.mu.RUnlock()
	r.mu.Lock()
	c = r.waits[k]
	if c == nil {
		c = &waitCell{}
		r.waits[k] = c
	}
	w := c.begin(now)
	r.mu.Unlock()
	return w
}

func (c *waitCell) begin(now time.Time) Wait {
	at := max(now.UnixMilli(), 1) // 0 marks a free place
	c.mu.Lock()
	var i int32
	if n := len(c.free); n > 0 {
		i = c.free[n-1]
		c.free = c.free[:n-1]
		c.starts[i] = at
	} else {
		i = int32(len(c.starts))
		c.starts = append(c.starts, at)
	}
	c.n++
	c.mu.Unlock()
	return Wait{c, i}
}

// End ends the wait. Call it once.
func (w Wait) End() {
	c := w.c
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.starts[w.i] != 0 {
		c.starts[w.i] = 0
		c.free = append(c.free, w.i)
		c.n--
	}
	c.mu.Unlock()
}

// state returns how many requests wait and the start (Unix ms) of the
// oldest, 0 when none does.
func (c *waitCell) state() (n int, oldest int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.starts {
		if s != 0 && (oldest == 0 || s < oldest) {
			oldest = s
		}
	}
	return c.n, oldest
}
