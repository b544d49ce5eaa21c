package tollgate

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tollgate/tollgate/internal/remember"
	"github.com/tollgate/tollgate/quota"
)

// What the Transport counts, read and corrected as it counts it: with the
// limits it enforces (less the reserve, sliding and fixed windows
// lengthened by Transit, what announcements taught), so that a status
// display or a manual correction reaches the very keys its decisions use.

// usageReads shares a usage read among concurrent callers.
type usageReads struct{ group singleflight.Group }

// Usage reads, writing nothing, how much of each limit of bucket is spent
// in scope, in the order of the bucket's Limits. Each Usage's Limit is the
// limit the Transport enforces: the configured one (or the announced one)
// less the reserve, its window lengthened by Transit. Concurrent calls for one scope and
// bucket share one read.
func (t *Transport) Usage(ctx context.Context, scope, bucket string) ([]quota.Usage, error) {
	limits, err := bucketLimits(t.limits, t.redis, scope, bucket)
	if err != nil {
		return nil, err
	}
	res := t.usage.group.DoChan(scope+"\x00"+bucket, func() (any, error) {
		// Shared: one caller giving up must not fail the others.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		out := make([]quota.Usage, len(limits))
		for i, lim := range limits {
			u, err := t.cfg.Limiter.Usage(rctx, scope, bucket, lim)
			if err != nil {
				return nil, err
			}
			out[i] = u
		}
		return out, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-res:
		if r.Err != nil {
			return nil, r.Err
		}
		return append([]quota.Usage(nil), r.Val.([]quota.Usage)...), nil
	}
}

// Record counts units of bucket spent in scope outside tollgate (a script,
// a dashboard, a colleague's curl), in every limit of the bucket, for every
// process sharing the Redis: they count from now, for a window. Units
// beyond the bucket's smallest limit count as that limit: the window is
// full either way.
func (t *Transport) Record(ctx context.Context, scope, bucket string, units int64) error {
	limits, err := bucketLimits(t.limits, t.redis, scope, bucket)
	if err != nil {
		return err
	}
	if units <= 0 {
		return fmt.Errorf("tollgate: record %d units: units must be positive", units)
	}
	for _, lim := range limits {
		units = min(units, lim.Units)
	}
	return t.cfg.Limiter.Record(ctx, scope, quota.Demand{Bucket: bucket, Units: units, Limits: limits})
}

// Pause stops every process sharing the Redis from spending bucket in
// scope, or the whole scope for bucket "", until d has passed, as when the
// upstream says its quota is spent; a shorter pause never cuts a longer
// one short. It counts as the upstream's pause (QuotaError.Cause is
// PausedByUpstream): operators pause with cmd/tollgate or
// quota.Limiter.PauseBecause. The processes listening are told at once. This
// process also refuses at once, without asking Redis, the requests whose
// policy fails fast.
func (t *Transport) Pause(ctx context.Context, scope, bucket string, d time.Duration) error {
	if bucket != "" {
		if _, ok := t.redis.limits[bucket]; !ok {
			return fmt.Errorf("tollgate: bucket %q is not one the cost table charges", bucket)
		}
	}
	p, err := pauseUpstream(t.cfg.Limiter, ctx, scope, bucket, d, "")
	if err != nil {
		return err
	}
	now := t.clock.now()
	t.refusals.Note(remember.Key{Scope: scope, Bucket: bucket}, remember.Refusal{Until: now.Add(d), Cause: uint8(pauseCause(p)), Pause: true, Reason: p.Reason}, now)
	return nil
}

// bucketLimits returns the limits the Transport enforces for bucket in
// scope: what announcements taught included, a limit still to be learned
// left out.
func bucketLimits(a *limits, d *decider, scope, bucket string) ([]quota.Limit, error) {
	if _, ok := d.limits[bucket]; !ok {
		return nil, fmt.Errorf("tollgate: bucket %q is not one the cost table charges", bucket)
	}
	limits, _ := a.of(d, scope, bucket, false)
	return limits, nil
}
