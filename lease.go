package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A LeaseFunc chooses how the requests of a scope's bucket spend: from
// leases of units each (taken in Redis in one decision, spent by this
// process without a round trip per call) lasting up to term, or, with
// zero units, call by call. It is called on every request that charges a
// single bucket and must be safe for concurrent use. See quota.Lease for
// what a lease guarantees.
type LeaseFunc func(scope, bucket string) (units int64, term time.Duration)

// leases holds this process's current lease per scope and bucket.
type leases struct {
	mu    sync.Mutex
	slots map[leaseKey]*leaseSlot
}

type leaseKey struct{ scope, bucket string }

// leaseSlot is one scope bucket's lease. Its mutex is held while the lease
// is renewed, and taken (briefly) to spend from it, so that while one
// request renews, the others wait for the new lease and spend from it
// first, in the order they came. A singleflight.Group sharing the renewal
// was measured 20% slower on one hot scope (bench/: BenchmarkHotScope/lease):
// the requests that shared a renewal woke after fresh ones had spent the
// new lease, and had to renew again.
type leaseSlot struct {
	mu sync.Mutex
	ls *quota.Lease
}

func (l *leases) slot(k leaseKey) *leaseSlot {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = make(map[leaseKey]*leaseSlot)
	}
	s := l.slots[k]
	if s == nil {
		s = &leaseSlot{}
		l.slots[k] = s
	}
	return s
}

// leasable returns the lease terms of a request that spends from leases,
// or false. Requests charging several buckets ask Redis call by call
// (their units must be taken together), and so do requests whose cost is
// settled after the response, that hold a slot, or that are background
// (which must wait their turn behind interactive ones).
func (t *Transport) leasable(c *call) (units int64, term time.Duration, ok bool) {
	if t.cfg.Lease == nil || len(c.endpoint.Charges) != 1 || c.endpoint.Free ||
		len(c.endpoint.Settle) > 0 || c.background || t.capped(c) {
		return 0, 0, false
	}
	if _, announced := t.announced[c.endpoint.Charges[0].Bucket]; announced {
		return 0, 0, false
	}
	units, term = t.cfg.Lease(c.scope, c.endpoint.Charges[0].Bucket)
	return units, term, units > 0 && term > 0
}

// spendLease spends the request's units from this process's lease, with
// no round trip, when the lease holds them.
func (t *Transport) spendLease(c *call) (outcome, bool) {
	if _, _, ok := t.leasable(c); !ok {
		return outcome{}, false
	}
	ch := c.endpoint.Charges[0]
	s := t.leases.slot(leaseKey{c.scope, ch.Bucket})
	s.mu.Lock()
	ls := s.ls
	s.mu.Unlock()
	if ls != nil && ls.Take(ch.Units) {
		return outcome{lease: ls, spent: t.now(), by: &t.redis}, true
	}
	return outcome{}, false
}

// renewLease ends the scope bucket's lease and takes a new one, then spends
// the request's units from it. It reports false, with no error, when no
// lease could be had (the quota has no room, or a hold waits): the request
// then decides call by call. A Redis failure is returned as it is.
func (t *Transport) renewLease(ctx context.Context, c *call) (outcome, bool, error) {
	units, term, ok := t.leasable(c)
	if !ok {
		return outcome{}, false, nil
	}
	t.listen(ctx) // first: a pause told once the lease is granted must reach it
	defer t.unlisten()
	ch := c.endpoint.Charges[0]
	s := t.leases.slot(leaseKey{c.scope, ch.Bucket})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ls != nil {
		if s.ls.Take(ch.Units) { // another request renewed it meanwhile
			return outcome{lease: s.ls, spent: t.now(), by: &t.redis}, true, nil
		}
		if err := s.ls.End(ctx); err != nil {
			t.log(ctx, slog.LevelWarn, "tollgate: could not end a lease; its units stay counted until it ends",
				slog.String("scope", c.scope), slog.String("bucket", ch.Bucket), slog.Any("err", err))
		}
		s.ls = nil
	}
	want := quota.Charge{Bucket: ch.Bucket, Units: max(units, ch.Units), Limits: t.redis.limits[ch.Bucket]}
	ls, err := t.cfg.Limiter.Lease(ctx, c.scope, want, term)
	if errors.Is(err, quota.ErrRefused) {
		return outcome{}, false, nil
	}
	if err != nil {
		return outcome{}, false, err
	}
	s.ls = ls
	if !ls.Take(ch.Units) {
		return outcome{}, false, nil // granted less than this request costs
	}
	return outcome{lease: ls, spent: t.now(), by: &t.redis}, true, nil
}

// endAll ends every lease, giving back what was not spent.
func (l *leases) endAll(ctx context.Context) error {
	l.mu.Lock()
	slots := l.slots
	l.slots = nil
	l.mu.Unlock()
	var errs []error
	for _, s := range slots {
		s.mu.Lock()
		if s.ls != nil {
			errs = append(errs, s.ls.End(ctx))
			s.ls = nil
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// end ends the leases of the scope buckets match reports true for, at
// once for the requests about to spend from them, then giving back what
// they did not spend: a pause told by another process concerns them.
func (l *leases) end(ctx context.Context, match func(leaseKey) bool) {
	l.mu.Lock()
	var slots []*leaseSlot
	for k, s := range l.slots {
		if match(k) {
			slots = append(slots, s)
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range slots {
		s.mu.Lock()
		ls := s.ls
		s.ls = nil
		s.mu.Unlock()
		if ls != nil {
			wg.Go(func() { _ = ls.End(ctx) })
		}
	}
	wg.Wait()
}

// live reports whether a lease may still be spent from, or is being
// taken.
func (l *leases) live() bool {
	l.mu.Lock()
	slots := make([]*leaseSlot, 0, len(l.slots))
	for _, s := range l.slots {
		slots = append(slots, s)
	}
	l.mu.Unlock()
	for _, s := range slots {
		if !s.mu.TryLock() {
			return true // being renewed
		}
		ls := s.ls
		s.mu.Unlock()
		if ls != nil && time.Now().Before(ls.Deadline()) {
			return true
		}
	}
	return false
}
