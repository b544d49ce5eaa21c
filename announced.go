package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/announce"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// Quotas the upstream announces (Bucket.Follows). Every response's
// headers are read (package announce) for the buckets tied to them. When
// the upstream counts more used than tollgate does, the difference (spent
// by programs that share the credential without tollgate) is counted as
// spent until the announced reset, in Redis, for every process; when it
// counts less, nothing is given back. An announced limit, and window when
// stated, replace the bucket's first limit's, so that a bucket learns its
// limit; one whose limit is not known yet (0 units) lets one request at a
// time through per scope until the first announcement. An announcement
// that says nothing is left pauses the bucket until its reset. The common
// case, an announcement that agrees with tollgate's count, costs no round
// trip; one that does not costs one.

// learnedName names the window of a bucket's first limit in Redis keys, so
// that an announced window can change without stranding what was counted.
const learnedName = "announced"

// A Reconciliation reports what an upstream's announcement changed in the
// shared count: never a credential; Scope is a pool's name or a hash.
type Reconciliation struct {
	// Scope and Bucket are the bucket announced, e.g. "project-a", "core".
	Scope, Bucket string
	// Announced is what the response said, e.g. 4700 of 5000 remaining
	// until 12:00.
	Announced announce.Quota
	// Outside is the units now counted as spent by others (beyond
	// tollgate's own count) until the announced reset; 0 when the
	// upstream agrees.
	Outside int64
	// Learned reports that the announcement changed the bucket's limit,
	// window or reset as this process knew them.
	Learned bool
	// Paused reports that nothing was left: the bucket pauses until the
	// reset, for every process.
	Paused bool
}

// A ReconcileHook is called when an announcement changed the shared count,
// taught a limit, or paused a bucket, on the goroutine of the request
// whose response announced it. Keep it quick, and safe for concurrent use.
type ReconcileHook func(ctx context.Context, r Reconciliation)

// learned is what this process knows of one announced bucket of a scope.
type learned struct {
	limit  int64         // the announced limit; 0: not known
	window time.Duration // the announced window; 0: not stated
	reset  time.Time     // the newest reset announced, as Redis holds it when it was told
	// gen counts the changes of limit and window: a request that waited
	// while one changed is decided again.
	gen uint64
}

// read takes in a reset this process read: a later one (by tol or more)
// starts a new window, until Redis tells the reading every process keeps
// (adopt); another reading of the same reset, or an older one, changes
// nothing.
func (l *learned) read(reset time.Time, tol time.Duration) {
	if !reset.IsZero() && (l.reset.IsZero() || reset.Sub(l.reset) >= tol) {
		l.reset = reset
	}
}

// adopt takes in what Redis holds of the bucket's newest announcement,
// which every process reads alike.
func (l *learned) adopt(a quota.Announced, tol time.Duration) {
	if l.reset.Sub(a.Reset) >= tol {
		return // this process read a newer one
	}
	if a.Limit > 0 {
		l.limit = a.Limit
	}
	if a.Window > 0 {
		l.window = a.Window
	}
	l.reset = a.Reset
}

type scopeBucket struct{ scope, bucket string }

// learnedState holds what the Transport learned, per scope and bucket.
type learnedState struct {
	mu sync.RWMutex
	m  map[scopeBucket]learned
}

// maxLearned bounds the state; past it, it starts afresh, which costs a
// round trip per scope to learn again.
const maxLearned = 1 << 14

func (s *learnedState) get(k scopeBucket) (learned, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.m[k]
	return l, ok
}

func (s *learnedState) update(k scopeBucket, f func(*learned)) learned {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxLearned {
		s.m = make(map[scopeBucket]learned)
	}
	l := s.m[k]
	was := l
	f(&l)
	if l.limit != was.limit || l.window != was.window {
		l.gen++
	}
	s.m[k] = l
	return l
}

// learnedGen returns the generation of what is learned of each announced
// bucket the call charges, in its scope.
func (t *Transport) learnedGen(c *call) []uint64 {
	if len(t.announced) == 0 {
		return nil
	}
	gens := make([]uint64, len(c.endpoint.Charges))
	for i, ch := range c.endpoint.Charges {
		if _, ok := t.announced[ch.Bucket]; ok {
			ln, _ := t.learn.get(scopeBucket{c.scope, ch.Bucket})
			gens[i] = ln.gen
		}
	}
	return gens
}

// outdated reports whether a request decided when its buckets were at
// generations gens must be decided again: an announcement changed a
// bucket's limit or window since.
func (t *Transport) outdated(c *call, gens []uint64) bool {
	for i, ch := range c.endpoint.Charges {
		if _, ok := t.announced[ch.Bucket]; !ok {
			continue
		}
		if ln, _ := t.learn.get(scopeBucket{c.scope, ch.Bucket}); ln.gen != gens[i] {
			return true
		}
	}
	return false
}

// matches reports whether an announced quota is the one a bucket names:
// by its name, or "dialect/name".
func matches(name string, q announce.Quota) bool {
	if dialect, n, ok := strings.Cut(name, "/"); ok {
		return q.Dialect == dialect && q.Name == n
	}
	return q.Name == name
}

// announcedLimits returns the limits a bucket has for scope on d, with
// what was learned of its first one, and whether the bucket is gated: its
// limit is not known yet (0 units), so that one request at a time goes,
// its first limit left out, until an announcement tells it.
func (t *Transport) announcedLimits(d *decider, c *call, scope, bucket string) ([]quota.Limit, bool) {
	limits := d.limitsFor(c)[bucket]
	if _, ok := t.announced[bucket]; !ok || len(limits) == 0 {
		return limits, false
	}
	ln, _ := t.learn.get(scopeBucket{scope, bucket})
	first := limits[0]
	if ln.limit > 0 {
		b := t.cfg.Buckets[bucket]
		units := ln.limit - b.keep(ln.limit)
		if c != nil && c.background {
			units = int64(float64(units) * t.bgShare)
		}
		if d.local {
			units = int64(float64(units) * t.cfg.LocalShare)
		}
		first.Units = max(units, 1)
		if first.Refill > 0 {
			// A learned token bucket refills its capacity a period, and
			// holds less than the upstream's by Transit (see lengthen).
			first.Refill = first.Units
			first = lengthen([]quota.Limit{first}, transit(t.cfg.Transit))[0]
		}
	}
	if ln.window > 0 && !first.Calendar && first.Refill == 0 {
		first.Window = ln.window + transit(t.cfg.Transit)
	}
	if first.Fixed {
		first.Ends = ln.reset
	}
	switch {
	case first.Units == 0:
		return limits[1:], true
	case first == limits[0]:
		return limits, false
	}
	return append([]quota.Limit{first}, limits[1:]...), false
}

// learning takes the gate of a bucket whose limit is not known yet in
// scope: one request at a time until an announcement tells it. It first
// reads what Redis holds of the newest announcement, which another process
// may have recorded; when that tells the limit, no gate is taken.
func (t *Transport) learning(ctx context.Context, d *decider, c *call, scope, bucket string, maxWait time.Duration) (*quota.Slot, error) {
	k := scopeBucket{scope, bucket}
	learned := func() bool {
		if a, ok, err := d.lim.LastAnnouncement(ctx, scope, bucket); err == nil && ok {
			t.learn.update(k, func(l *learned) { l.adopt(a, quota.ResetTolerance(t.windowOf(bucket, *l, a.Window))) })
		}
		_, gated := t.announcedLimits(d, c, scope, bucket)
		return !gated
	}
	if learned() {
		return nil, nil
	}
	slot, err := d.lim.TakeSlot(ctx, scope, "learn."+bucket, 1, maxWait)
	if err != nil {
		return nil, err
	}
	if _, gated := t.announcedLimits(d, c, scope, bucket); !gated || learned() {
		t.releaseSlots(ctx, []*quota.Slot{slot}) // learned while it waited
		return nil, nil
	}
	return slot, nil
}

// reconcile reads what the response announces of the Transport's
// announced buckets, in the scope the request spent, and holds the shared
// count to it.
func (t *Transport) reconcile(ctx context.Context, c *call, o outcome, header http.Header) {
	if len(t.announced) == 0 || o.open {
		return
	}
	now := t.now()
	qs := announce.Read(header, now)
	if len(qs) == 0 {
		return
	}
	scope := o.scope(c)
	for bucket, name := range t.announced {
		for _, q := range qs {
			if matches(name, q) {
				t.reconcileOne(ctx, o.by, o.res, scope, bucket, q, now)
				break
			}
		}
	}
}

// reconcileOne holds one bucket to one announcement, read in the response
// to the call r admitted (nil: one that charged the bucket nothing, such
// as the first while its limit is learned).
func (t *Transport) reconcileOne(ctx context.Context, d *decider, r *quota.Reservation, scope, bucket string, q announce.Quota, now time.Time) {
	if d == nil {
		d = &t.redis
	}
	k := scopeBucket{scope, bucket}
	prev, _ := t.learn.get(k)
	tol := quota.ResetTolerance(t.windowOf(bucket, prev, q.Window))
	if !q.Reset.IsZero() && prev.reset.Sub(q.Reset) >= tol {
		return // an older response than one already read
	}
	next := t.learn.update(k, func(l *learned) {
		if q.Limit > 0 {
			l.limit = q.Limit
		}
		if q.Window > 0 {
			l.window = q.Window
		}
		l.read(q.Reset, tol)
	})
	defer func() {
		if cur, _ := t.learn.get(k); cur.gen != prev.gen {
			t.redecide(ctx, k)
		}
	}()
	rec := Reconciliation{Scope: scope, Bucket: bucket, Announced: q,
		Learned: next.limit != prev.limit || next.window != prev.window || next.reset.Sub(prev.reset) >= tol}

	used := q.Used
	if used < 0 && q.Limit >= 0 && q.Remaining >= 0 {
		used = max(q.Limit-q.Remaining, 0)
	}
	// The count agrees when the upstream leaves at least the room tollgate
	// counted when it admitted the call (plus the reserve it keeps below
	// the upstream's limit): the upstream counts no more than tollgate did.
	room := int64(-1)
	var asOf time.Time
	if r != nil {
		room, asOf = r.RemainingOf(bucket), r.Time()
	}
	agrees := q.Remaining >= 0 && room >= 0 && q.Remaining >= room+t.cfg.Buckets[bucket].keep(max(q.Limit, 0))
	if !q.Reset.IsZero() && q.Reset.After(now) && used >= 0 && (!agrees || rec.Learned) {
		limits, _ := t.announcedLimits(d, nil, scope, bucket)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		a, err := d.lim.Announce(pctx, scope, bucket, quota.Announcement{
			Used: used, Reset: q.Reset, Limit: max(q.Limit, 0), Window: q.Window, AsOf: asOf}, limits...)
		cancel()
		if err != nil {
			t.log(ctx, slog.LevelWarn, "tollgate: could not record what the upstream announced",
				slog.String("scope", scope), slog.String("bucket", bucket), slog.Any("err", err))
		} else {
			// Every process then holds the bucket to the same readings.
			t.learn.update(k, func(l *learned) { l.adopt(a, tol) })
			if a.Changed {
				rec.Outside = a.Outside
			}
		}
	}
	if q.Remaining == 0 && q.Reset.After(now) {
		if qe, known := t.exhausted.check(scope, bucketEndpoint(bucket), now); !known || qe.Cause != PausedByUpstream || qe.RetryAfter < q.Reset.Sub(now) {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			const reason = "the upstream announced none left until its reset"
			_, err := d.lim.PauseUpstream(pctx, scope, bucket, q.Reset.Sub(now), reason)
			cancel()
			if err == nil {
				t.exhausted.note(scope, bucket, 0, PausedByUpstream, reason, q.Reset, now)
				rec.Paused = true
			}
		}
	}
	if rec.Outside == 0 && !rec.Learned && !rec.Paused {
		return
	}
	if t.cfg.OnReconcile != nil {
		t.cfg.OnReconcile(ctx, rec)
	}
	level := slog.LevelDebug
	if rec.Outside > 0 {
		level = slog.LevelWarn
	}
	t.log(ctx, level, "tollgate: the upstream's announcement reconciled",
		slog.String("scope", scope), slog.String("bucket", bucket), slog.Int64("remaining", q.Remaining),
		slog.Time("reset", q.Reset), slog.Int64("outside", rec.Outside), slog.Bool("learned", rec.Learned), slog.Bool("paused", rec.Paused))
}

// windowOf returns the window of a bucket's announced quota: as
// announced, or else as its first limit says.
func (t *Transport) windowOf(bucket string, ln learned, announced time.Duration) time.Duration {
	switch {
	case announced > 0:
		return announced
	case ln.window > 0:
		return ln.window
	}
	if lims := t.cfg.Buckets[bucket].Limits; len(lims) > 0 {
		return lims[0].Window
	}
	return 0
}

// usable drops a limit still to be learned (0 units), which no script can
// check.
func usable(limits []quota.Limit) []quota.Limit {
	if len(limits) > 0 && limits[0].Units == 0 {
		return limits[1:]
	}
	return limits
}

// bucketEndpoint is a request charging bucket nothing, to ask the
// known-exhausted cache whether the bucket is paused.
func bucketEndpoint(bucket string) costs.Endpoint {
	return costs.Endpoint{Charges: []costs.Charge{{Bucket: bucket}}}
}

// errRedecide ends the wait of a hold whose bucket's limit or window an
// announcement changed: the hold was given back, and the request decides
// again under what the announcement said.
var errRedecide = errors.New("tollgate: an announcement changed the limit the hold was decided under")

// holdWaiters are the requests waiting for holds on announced buckets, per
// scope bucket, so that an announcement that changes a bucket's limit or
// window gives all of their holds back before any of them decides again:
// one by one, each would find the others' outdated holds still counted.
type holdWaiters struct {
	mu sync.Mutex
	m  map[scopeBucket]map[*quota.Reservation]context.CancelCauseFunc
}

// add registers a hold under each of keys, with the function that ends its
// wait.
func (h *holdWaiters) add(keys []scopeBucket, r *quota.Reservation, stop context.CancelCauseFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[scopeBucket]map[*quota.Reservation]context.CancelCauseFunc)
	}
	for _, k := range keys {
		if h.m[k] == nil {
			h.m[k] = make(map[*quota.Reservation]context.CancelCauseFunc)
		}
		h.m[k][r] = stop
	}
}

// remove forgets a hold.
func (h *holdWaiters) remove(keys []scopeBucket, r *quota.Reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		delete(h.m[k], r)
		if len(h.m[k]) == 0 {
			delete(h.m, k)
		}
	}
}

// take forgets and returns the holds waiting on k.
func (h *holdWaiters) take(k scopeBucket) map[*quota.Reservation]context.CancelCauseFunc {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := h.m[k]
	delete(h.m, k)
	return held
}

// redecide gives back the holds waiting on a bucket whose limit or window
// changed, together, then wakes their requests to decide again.
func (t *Transport) redecide(ctx context.Context, k scopeBucket) {
	held := t.holds.take(k)
	if len(held) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range held {
		wg.Go(func() { _ = r.Cancel(cctx) }) // concurrent: the limiter pipelines them
	}
	wg.Wait()
	for _, stop := range held {
		stop(errRedecide)
	}
}

// announcedKeys returns the announced buckets a call charges, in its scope.
func (t *Transport) announcedKeys(c *call) []scopeBucket {
	var keys []scopeBucket
	for _, ch := range c.endpoint.Charges {
		if _, ok := t.announced[ch.Bucket]; ok {
			keys = append(keys, scopeBucket{c.scope, ch.Bucket})
		}
	}
	return keys
}
