package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

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
	mu      sync.Mutex
	current map[leaseKey]*quota.Lease
	renew   singleflight.Group // one renewal per scope and bucket at a time
}

type leaseKey struct{ scope, bucket string }

func (k leaseKey) String() string { return k.scope + "\x00" + k.bucket }

func (l *leases) get(k leaseKey) *quota.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current[k]
}

// swap makes next the current lease of k, and returns the one it replaces.
func (l *leases) swap(k leaseKey, next *quota.Lease) *quota.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current == nil {
		l.current = make(map[leaseKey]*quota.Lease)
	}
	old := l.current[k]
	if next == nil {
		delete(l.current, k)
	} else {
		l.current[k] = next
	}
	return old
}

// leasable returns the lease terms of a request that spends from leases,
// or false. Requests charging several buckets ask Redis call by call:
// their units must be taken together.
func (t *Transport) leasable(c *call) (units int64, term time.Duration, ok bool) {
	if t.cfg.Lease == nil || len(c.endpoint.Charges) != 1 {
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
	if ls := t.leases.get(leaseKey{c.scope, ch.Bucket}); ls != nil && ls.Take(ch.Units) {
		return outcome{lease: ls, spent: t.now(), by: &t.redis}, true
	}
	return outcome{}, false
}

// renewLease ends the scope bucket's lease and takes a new one, then spends
// the request's units from it. Concurrent requests share one renewal. It
// reports false, with no error, when no lease could be had (the quota has
// no room, or a hold waits): the request then decides call by call. A
// Redis failure is returned as it is.
func (t *Transport) renewLease(ctx context.Context, c *call) (outcome, bool, error) {
	units, term, ok := t.leasable(c)
	if !ok {
		return outcome{}, false, nil
	}
	ch := c.endpoint.Charges[0]
	k := leaseKey{c.scope, ch.Bucket}
	spent := t.leases.get(k) // the lease this request found wanting
	// The renewal is shared: the caller that starts it must not cut it
	// short for the others by giving up. The client's timeouts bound it.
	rctx := context.WithoutCancel(ctx)
	res := t.leases.renew.DoChan(k.String(), func() (any, error) {
		if cur := t.leases.get(k); cur != nil && cur != spent {
			return cur, nil // renewed since the caller looked
		}
		if old := t.leases.swap(k, nil); old != nil {
			if err := old.End(rctx); err != nil {
				t.log(ctx, slog.LevelWarn, "tollgate: could not end a lease; its units stay counted until it ends",
					slog.String("scope", c.scope), slog.String("bucket", ch.Bucket), slog.Any("err", err))
			}
		}
		want := quota.Charge{Bucket: ch.Bucket, Units: max(units, ch.Units), Limits: t.redis.limits[ch.Bucket]}
		ls, err := t.cfg.Limiter.Lease(rctx, c.scope, want, term)
		if err != nil {
			return nil, err
		}
		t.leases.swap(k, ls)
		return ls, nil
	})
	select {
	case <-ctx.Done():
		return outcome{}, false, ctx.Err()
	case r := <-res:
		if errors.Is(r.Err, quota.ErrRefused) {
			return outcome{}, false, nil
		}
		if r.Err != nil {
			return outcome{}, false, r.Err
		}
		ls := r.Val.(*quota.Lease)
		if !ls.Take(ch.Units) {
			return outcome{}, false, nil // granted less than this request costs, or spent by others already
		}
		return outcome{lease: ls, spent: t.now(), by: &t.redis}, true, nil
	}
}

// endAll ends every lease, giving back what was not spent.
func (l *leases) endAll(ctx context.Context) error {
	l.mu.Lock()
	current := l.current
	l.current = nil
	l.mu.Unlock()
	var errs []error
	for _, ls := range current {
		errs = append(errs, ls.End(ctx))
	}
	return errors.Join(errs...)
}
