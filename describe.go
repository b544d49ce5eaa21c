package tollgate

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Descriptions for operators. Redis holds what each window spent, not its
// limit; so that cmd/tollgate can show used against limit without this
// program's configuration, the Transport leaves in Redis a description of
// each bucket it decides on in each scope (quota.Describe): its limits as
// enforced, the upstream's quotas behind them, its cap, and how an
// announced limit is followed. It writes one once per process per scope
// bucket, after a decision Redis answered, and again every describeEvery,
// off the request's path (a slow Redis must not slow a request for it); a
// bucket no process decides on any more vanishes from them.

// describeEvery is how often a process writes a scope bucket's
// description again: less than half of the hour it lasts at least.
const describeEvery = 30 * time.Minute

// maxDescribed bounds what the Transport remembers of its descriptions;
// past it, it starts afresh, which costs a write per scope bucket.
const maxDescribed = 1 << 14

// scopeBucket names a scope's bucket.
type scopeBucket struct{ scope, bucket string }

// described remembers when each scope bucket's description is due again,
// and so which scope buckets this process decided on: the pauses other
// processes tell reach those (notices.go).
type described struct {
	limiter *quota.Limiter
	redis   *decider
	limits  *limits
	closed  *atomic.Bool
	hooks   *hooks

	mu      sync.RWMutex
	due     map[scopeBucket]time.Time
	writing sync.WaitGroup
}

// describe writes, in the background and in one round trip, the
// descriptions of the buckets the request charges in the scope it spends
// that are due at its instant. A failure costs nothing but a retry a
// minute later: descriptions serve the operators' tools only.
func (d *described) describe(ctx context.Context, r *request) {
	scope, now := r.spending(), r.now
	d.mu.RLock()
	due := d.dueAny(r, scope, now)
	d.mu.RUnlock()
	if !due {
		return
	}
	var ds []quota.Description
	d.mu.Lock()
	if d.due == nil || len(d.due) >= maxDescribed {
		d.due = make(map[scopeBucket]time.Time)
	}
	for _, ch := range r.endpoint.Charges {
		k := scopeBucket{scope, ch.Bucket}
		if at, ok := d.due[k]; !ok || !now.Before(at) {
			ds = append(ds, d.description(scope, ch.Bucket))
			d.due[k] = now.Add(describeEvery)
		}
	}
	if len(ds) == 0 || d.closed.Load() {
		d.mu.Unlock()
		return
	}
	d.writing.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.writing.Done()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := d.limiter.Describe(wctx, ds...); err != nil {
			d.hooks.log(wctx, slog.LevelDebug, "tollgate: could not describe a bucket for the operators' tools",
				slog.String("scope", scope), slog.Any("err", err))
			d.mu.Lock()
			for _, x := range ds {
				d.due[scopeBucket{scope, x.Bucket}] = now.Add(time.Minute)
			}
			d.mu.Unlock()
		}
	}()
}

// dueAny reports whether a bucket the request charges in scope is due to
// be described; d.mu is held.
func (d *described) dueAny(r *request, scope string, now time.Time) bool {
	for _, ch := range r.endpoint.Charges {
		if at, ok := d.due[scopeBucket{scope, ch.Bucket}]; !ok || !now.Before(at) {
			return true
		}
	}
	return false
}

// description describes a bucket as the Transport enforces it.
func (d *described) description(scope, bucket string) quota.Description {
	b := d.limits.buckets[bucket]
	x := quota.Description{
		Scope: scope, Bucket: bucket, Limits: d.redis.limits[bucket], InFlight: d.redis.caps[bucket],
		Announced: b.Follows, ReserveUnits: b.ReserveUnits, ReservePercent: b.ReservePercent, Transit: d.limits.transit,
		Pace: b.Pace, Shares: b.Shares,
	}
	for _, l := range b.Limits {
		x.Quotas = append(x.Quotas, l.Units)
	}
	return x
}

// known returns the scope buckets this process decided on.
func (d *described) known() []scopeBucket {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]scopeBucket, 0, len(d.due))
	for k := range d.due {
		out = append(out, k)
	}
	return out
}
