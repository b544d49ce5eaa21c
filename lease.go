package tollgate

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/internal/lease"
	"github.com/tollgate/tollgate/internal/notices"
	"github.com/tollgate/tollgate/quota"
)

// leasing is the stage of leases (internal/lease): before Redis, a request
// spends from this process's lease when it holds its units (spend); on
// Redis, it renews the lease and spends from the new one (renew).
type leasing struct {
	choose    func(scope, bucket string) (units int64, term time.Duration)
	leases    *lease.Leases
	limits    *limits
	redis     *decider
	listening *notices.Listening
	hooks     *hooks
	clock     *clock
}

// leasable returns the lease terms of a request that spends from leases,
// or false. Requests charging several buckets ask Redis call by call
// (their units must be taken together), and so do requests whose cost is
// settled after the response, that hold a slot, that charge an announced
// bucket or one with a pace or shares, or that are background (which must wait their turn behind
// interactive ones).
func (s *leasing) leasable(r *request) (units int64, term time.Duration, ok bool) {
	if s.choose == nil || len(r.endpoint.Charges) != 1 || r.endpoint.Free ||
		len(r.endpoint.Settle) > 0 || r.background || s.redis.capped(r) {
		return 0, 0, false
	}
	if _, announced := s.limits.announced[r.endpoint.Charges[0].Bucket]; announced {
		return 0, 0, false
	}
	if s.limits.fair(r.endpoint.Charges[0].Bucket) {
		// A process's lease serves all its callers, while a share is one
		// caller's (quota.Lease takes a lease from one tenant's part).
		return 0, 0, false
	}
	units, term = s.choose(r.scope, r.endpoint.Charges[0].Bucket)
	return units, term, units > 0 && term > 0
}

// spend spends the request's units from this process's lease, with no
// round trip, when the lease holds them.
func (s *leasing) spend(_ context.Context, r *request) (bool, error) {
	if _, _, ok := s.leasable(r); !ok {
		return false, nil
	}
	ch := r.endpoint.Charges[0]
	if !s.leases.Spend(lease.Key{Scope: r.scope, Bucket: ch.Bucket}, ch.Units) {
		return false, nil
	}
	// The instant it was spent, read now that its units are taken: it may
	// have waited for another request's renewal, and spent from a lease
	// granted after it came.
	s.admit(r, s.clock.now())
	return true, nil
}

// renew ends the scope bucket's lease and takes a new one, then spends
// the request's units from it. It passes the request on, with no error,
// when no lease could be had (the quota has no room, or a hold waits):
// the request then decides call by call. A Redis failure is returned as
// it is.
func (s *leasing) renew(ctx context.Context, r *request) (bool, error) {
	units, term, ok := s.leasable(r)
	if !ok {
		return false, nil
	}
	s.listening.Listen(ctx) // first: a pause told once the lease is granted must reach it
	defer s.listening.Unlisten()
	ch := r.endpoint.Charges[0]
	want := quota.Demand{Bucket: ch.Bucket, Units: max(units, ch.Units), Limits: s.redis.limits[ch.Bucket]}
	at, ok, err := s.leases.Renew(ctx, lease.Key{Scope: r.scope, Bucket: ch.Bucket}, ch.Units, s.clock.now, term,
		func(ctx context.Context) (*quota.Lease, error) { return s.redis.lim.Lease(ctx, r.scope, want, term) },
		func(err error) {
			s.hooks.log(ctx, slog.LevelWarn, "tollgate: could not end a lease; its units stay counted until it ends",
				slog.String("scope", r.scope), slog.String("bucket", ch.Bucket), slog.Any("err", err))
		})
	if ok {
		s.admit(r, at)
	}
	return ok, err
}

// admit marks the request spent from a lease at the instant at.
func (s *leasing) admit(r *request, at time.Time) {
	r.decide(fromLease, s.redis)
	r.at = at
}
