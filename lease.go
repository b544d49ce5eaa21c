package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Lease is how a scope's requests spend from leases: blocks of Units of a
// bucket taken in one decision and spent by this process call by call for
// up to For, with no round trip to Redis (see quota.Lease). Zero Units
// means no lease: every request asks Redis.
type Lease struct {
	Units int64         // e.g. 200
	For   time.Duration // e.g. 2s; a lease also ends with its calendar day
}

// A LeaseFunc chooses the lease of a scope's requests. It is called on
// every request and must be safe for concurrent use.
type LeaseFunc func(scope string) Lease

// leases holds this process's current lease per scope and bucket.
type leases struct {
	mu    sync.Mutex
	slots map[leaseKey]*leaseSlot
}

type leaseKey struct{ scope, bucket string }

// leaseSlot is one scope bucket's lease. Its mutex is held while the lease
// is renewed, so that one request renews while the others wait for it.
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

// leasable returns the lease settings and the only charge of a request that
// spends from leases, or false. Requests charging several buckets ask Redis
// call by call: their units must be taken together.
func (t *Transport) leasable(c *call) (Lease, bool) {
	if t.Lease == nil || len(c.endpoint.Charges) != 1 {
		return Lease{}, false
	}
	cfg := t.Lease(c.scope)
	return cfg, cfg.Units > 0 && cfg.For > 0
}

// spendLease spends the request's units from this process's lease, with
// no round trip, when the lease holds them.
func (t *Transport) spendLease(st *state, c *call) (outcome, bool) {
	if _, ok := t.leasable(c); !ok {
		return outcome{}, false
	}
	ch := c.endpoint.Charges[0]
	s := st.leases.slot(leaseKey{c.scope, ch.Bucket})
	s.mu.Lock()
	ls := s.ls
	s.mu.Unlock()
	if ls != nil && ls.Take(ch.Units) {
		return outcome{lease: ls, spent: time.Now(), mode: ModeRedis}, true
	}
	return outcome{}, false
}

// renewLease ends the scope bucket's lease and takes a new one, then spends
// the request's units from it. It reports false, with no error, when no
// lease could be had (the quota has no room, or a hold waits): the request
// then decides call by call. A Redis failure is returned as it is.
func (t *Transport) renewLease(ctx context.Context, st *state, c *call) (outcome, bool, error) {
	cfg, ok := t.leasable(c)
	if !ok {
		return outcome{}, false, nil
	}
	ch := c.endpoint.Charges[0]
	s := st.leases.slot(leaseKey{c.scope, ch.Bucket})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ls != nil {
		if s.ls.Take(ch.Units) { // another request renewed it meanwhile
			return outcome{lease: s.ls, spent: time.Now(), mode: ModeRedis}, true, nil
		}
		if err := s.ls.End(ctx); err != nil {
			t.log(ctx, slog.LevelWarn, "tollgate: could not end a lease; its units stay counted until it ends",
				slog.String("scope", c.scope), slog.String("bucket", ch.Bucket), slog.Any("err", err))
		}
		s.ls = nil
	}
	want := quota.Charge{Bucket: ch.Bucket, Cost: max(cfg.Units, ch.Units), Limits: st.limits[ch.Bucket]}
	ls, err := t.Limiter.Lease(ctx, c.scope, want, cfg.For)
	if err != nil {
		if errors.Is(err, quota.ErrRefused) {
			return outcome{}, false, nil
		}
		return outcome{}, false, err
	}
	s.ls = ls
	if !ls.Take(ch.Units) {
		return outcome{}, false, nil // granted less than this request costs
	}
	return outcome{lease: ls, spent: time.Now(), mode: ModeRedis}, true, nil
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
