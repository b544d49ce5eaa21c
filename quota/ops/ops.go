// Package ops is what only operators' tools call on a quota.Limiter's
// Redis: list the scopes and buckets it holds ([Operator.Survey]), read
// what is under way in a bucket ([Operator.Activity]), a window's usage
// and the slices its log counts, for forecasts ([Operator.Series]), and
// how a bucket is limited ([Operator.Description]), lift pauses
// ([Operator.Resume]), wait until every process listening has applied a
// pause or a resume ([Operator.Confirm]), and keep and read the record of
// operators' actions ([Operator.Record], [Operator.Actions]).
// cmd/tollgate is built on it. A program that only spends quota never
// needs it: decisions, pauses and descriptions are package quota's.
//
// Begin with [New] on the Limiter the programs' processes share a Redis
// and a key prefix with:
//
//	op := ops.New(lim)
//	scopes, err := op.Survey(ctx, "")
package ops

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// An Operator reads and acts on what a quota.Limiter keeps in Redis, for
// operators' tools. Create one with [New]; it is safe for concurrent use,
// and holds nothing that needs closing.
type Operator struct {
	op access.Operator[quota.Limit, quota.Description]
}

// of is how package quota gives an Operator what it needs of a Limiter.
var of = access.Of.(func(*quota.Limiter) access.Operator[quota.Limit, quota.Description])

// New returns an Operator on what l keeps: its Redis, its key prefix
// (quota.WithPrefix) and its clock (quota.WithClock). Pauses are set with
// l's own PauseBecause; Confirm counts the notices l tells.
func New(l *quota.Limiter) *Operator {
	return &Operator{op: of(l)}
}

// A StoredScope is what Redis holds of one scope under a limiter's
// prefix, as Survey finds it.
type StoredScope struct {
	// Scope is the scope's name: as its keys spell it, or, for a name the
	// keys hold a hash of, as a description of one of its buckets tells
	// it; "#" and the hash when none does (Hashed).
	Scope string
	// Hashed reports that the name is not known, only its hash.
	Hashed bool
	// Paused reports that a pause of the whole scope is set.
	Paused bool
	// Buckets are the scope's buckets found, ordered by name.
	Buckets []StoredBucket
}

// A StoredBucket is what Redis holds of one bucket of a scope.
type StoredBucket struct {
	// Bucket is the bucket's name, found as for StoredScope.Scope.
	Bucket string
	// Description is what a process said of the bucket (see
	// quota.Limiter.Describe); nil when none did.
	Description *quota.Description
	// Windows are the windows whose keys were found, as keys name them:
	// e.g. "w1m0.05s" (sliding), "day@America/Los_Angeles", "f1h0m0s"
	// (fixed), "n.announced" (named), "r1m0s" (a token bucket).
	Windows []string
	// Paused reports that a pause of the bucket is set.
	Paused bool
	// Announced reports that an upstream's announcement is recorded.
	Announced bool
	// Slots reports keys of a cap on calls in flight.
	Slots bool
	// Err is why the bucket's description could not be read (a value no
	// tollgate wrote, or of a newer format, matching quota.ErrFormat);
	// Description is then nil. The other buckets and scopes are read as
	// usual.
	Err error
}

// Survey lists every scope and bucket that has keys under the limiter's
// prefix, with SCAN on every node (never KEYS), and reads their
// descriptions; for a non-empty scope, that scope alone (matched by its
// name, or by the "#" hash a StoredScope shows), scanning its node only.
// It returns nothing, and no error, when there are no such keys. A
// bucket's gate while its limit is learned is not listed.
func (o *Operator) Survey(ctx context.Context, scope string) ([]StoredScope, error) {
	found, err := o.op.Survey(ctx, scope)
	if err != nil || found == nil {
		return nil, err
	}
	out := make([]StoredScope, len(found))
	for i, s := range found {
		out[i] = StoredScope{Scope: s.Scope, Hashed: s.Hashed, Paused: s.Paused}
		if s.Buckets != nil {
			out[i].Buckets = make([]StoredBucket, len(s.Buckets))
			for j, b := range s.Buckets {
				out[i].Buckets[j] = StoredBucket(b)
			}
		}
	}
	return out, nil
}

// Activity is what is under way in one bucket of a scope at one instant:
// for status displays, beside quota.Limiter.Usage. Instants are on the
// limiter's clock.
type Activity struct {
	// Now is the instant it was read at.
	Now time.Time
	// Leases is the leases out on the bucket (see quota.Limiter.Lease):
	// taken and not yet at their end, e.g. 3.
	Leases int
	// Leased is the units those leases were granted, spent or not, e.g. 600.
	Leased int64
	// LeasedUntil is when the last of them ends; zero when none is out.
	LeasedUntil time.Time
	// InFlight is the slots of the bucket's cap held (see
	// quota.Limiter.TakeSlot), e.g. 12.
	InFlight int
	// SlotWaiters is the callers waiting for a slot, e.g. 2.
	SlotWaiters int
	// BackgroundWaiters is the background callers waiting their turn in
	// the bucket's scope (see quota.WithPriority), e.g. 5.
	BackgroundWaiters int
}

// Activity reads, writing nothing, what is under way in a bucket of
// scope: the leases out (as limit's window records them: every window of
// a bucket records the same leases), slots held and callers waiting.
func (o *Operator) Activity(ctx context.Context, scope, bucket string, limit quota.Limit) (Activity, error) {
	a, err := o.op.Activity(ctx, scope, bucket, limit)
	return Activity(a), err
}

// A Series is one window's usage and the slices counted in it, read at
// one instant: what forecasts are made of (the window's own log, which
// tollgate keeps anyway; reading it writes nothing).
type Series struct {
	// Usage is the window's usage at Usage.Now, as quota.Limiter.Usage
	// reads it.
	Usage quota.Usage
	// Slices are the units counted in the window at Usage.Now, oldest
	// first: the log's slices (each a thousandth of the window, dated at
	// its latest call), holds dated after Now included, and the leases
	// and the units an upstream announced as spent, each dated at its end.
	// Units dated At leave a sliding window at At plus its length. Nil for
	// a token bucket, which keeps no log.
	Slices []Slice
}

// A Slice is units counted at one instant of a window's log.
type Slice struct {
	// At is the instant the units are dated at, e.g. 14:05:02.120.
	At time.Time
	// Units is the units counted there, e.g. 300.
	Units int64
}

// Series reads, writing nothing, the usage of limit in a bucket of scope
// and the slices its window counts, at one instant (one script, one round
// trip). Instants are on the limiter's clock.
func (o *Operator) Series(ctx context.Context, scope, bucket string, limit quota.Limit) (Series, error) {
	s, err := o.op.Series(ctx, scope, bucket, limit)
	if err != nil {
		return Series{}, err
	}
	out := Series{Usage: quota.Usage{Limit: limit, Now: s.Now, Used: s.Used, Held: s.Held,
		Remaining: max(limit.Units-s.Used, 0), NextFree: s.NextFree, Reset: s.Reset, PausedUntil: s.PausedUntil}}
	if len(s.Slices) > 0 {
		out.Slices = make([]Slice, len(s.Slices))
		for i, x := range s.Slices {
			out.Slices[i] = Slice(x)
		}
	}
	return out, nil
}

// Description reads the description of bucket in scope that a process
// wrote (quota.Limiter.Describe), and false when there is none. A
// description this version cannot read exactly is an error matching
// quota.ErrFormat.
func (o *Operator) Description(ctx context.Context, scope, bucket string) (quota.Description, bool, error) {
	return o.op.Description(ctx, scope, bucket)
}

// Resume lifts the pause of bucket in scope, or for bucket "" the
// scope's pause and the pause of every bucket in it, whoever set them (an
// upstream's 429 included), and tells every process listening (see
// quota.Limiter.Listen). It returns the number of pauses lifted.
func (o *Operator) Resume(ctx context.Context, scope, bucket string) (int, error) {
	return o.op.Resume(ctx, scope, bucket)
}

// A Reach says how far notices went: how many processes were listening
// when they were told, and how many of those acknowledged applying them.
type Reach struct {
	// Listening is the processes listening when the notices were told,
	// e.g. 8.
	Listening int
	// Applied is how many acknowledged every notice in time, e.g. 8.
	Applied int
}

// Confirm runs act, which pauses (the Limiter's PauseBecause) or resumes
// (Resume) through this Operator's Limiter, and waits until every process
// listening has acknowledged applying each notice act told, or wait has
// passed, or ctx ends: so that when it returns, every process spending
// from a lease or remembering a refusal (or, for tollgate's Transports,
// with requests waiting) has seen what it did. The processes not
// listening hold none of these, and see pauses in Redis at their next
// decision. Then it tells that each resume was applied
// (quota.Notice.Confirmed): a Transport's requests that waited behind the
// pause gave their holds back on hearing the resume, and decide again on
// hearing this, in every process at once. Run one Confirm at a time per
// Limiter, and no other pause while it runs: it counts the notices the
// Limiter tells.
func (o *Operator) Confirm(ctx context.Context, wait time.Duration, act func(ctx context.Context) error) (Reach, error) {
	r, err := o.op.Confirm(ctx, wait, act)
	return Reach(r), err
}

// A Tenant is what one tenant of a window with shares (quota.Shares) has
// spent, as Tenants reads it.
type Tenant struct {
	// Name is the tenant, e.g. "eu-west".
	Name string
	// Units is what it spent in the window holding the instant asked
	// about, holds dated in it included, e.g. 120.
	Units int64
	// Held is what it holds in later windows, e.g. 5.
	Held int64
	// Seen is the instant of its latest request, admitted or not.
	Seen time.Time
	// Waiting is how many of its calls wait in the bucket's room (a
	// tenant at or above its share, a background call; docs/shares.md,
	// "Who waits first"), read with the rest, e.g. 2. The room keeps no
	// units: a waiting call takes none until admitted.
	Waiting int
}

// Tenants reads, writing nothing, the tenants of a calendar day or fixed
// window with shares (limit as the bucket's decisions name it) and what
// each spent in the window holding now, ordered by name; none when the
// window has no shares, or its tenants have all gone idle with nothing
// left in it.
func (o *Operator) Tenants(ctx context.Context, scope, bucket string, limit quota.Limit, now time.Time) ([]Tenant, error) {
	ts, err := o.op.Tenants(ctx, scope, bucket, limit, now)
	out := make([]Tenant, len(ts))
	for i, t := range ts {
		out[i] = Tenant(t)
	}
	return out, err
}
