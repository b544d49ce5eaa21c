package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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

// described remembers when each scope bucket's description is due again,
// and so which scope buckets this process decided on: the pauses other
// processes tell reach those (notices.go).
type described struct {
	mu      sync.RWMutex
	due     map[scopeBucket]time.Time
	writing sync.WaitGroup
}

// describe writes, in the background and in one round trip, the
// descriptions of the buckets the call charges in scope that are due. A
// failure costs nothing but a retry a minute later: descriptions serve
// the operators' tools only.
func (t *Transport) describe(ctx context.Context, c *call, scope string) {
	now := t.now()
	t.described.mu.RLock()
	due := t.described.dueAny(c, scope, now)
	t.described.mu.RUnlock()
	if !due {
		return
	}
	var ds []quota.Description
	t.described.mu.Lock()
	if t.described.due == nil || len(t.described.due) >= maxDescribed {
		t.described.due = make(map[scopeBucket]time.Time)
	}
	for _, ch := range c.endpoint.Charges {
		k := scopeBucket{scope, ch.Bucket}
		if at, ok := t.described.due[k]; !ok || !now.Before(at) {
			ds = append(ds, t.description(scope, ch.Bucket))
			t.described.due[k] = now.Add(describeEvery)
		}
	}
	if len(ds) == 0 || t.closed.Load() {
		t.described.mu.Unlock()
		return
	}
	t.described.writing.Add(1)
	t.described.mu.Unlock()
	go func() {
		defer t.described.writing.Done()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := t.cfg.Limiter.Describe(wctx, ds...); err != nil {
			t.log(wctx, slog.LevelDebug, "tollgate: could not describe a bucket for the operators' tools",
				slog.String("scope", scope), slog.Any("err", err))
			t.described.mu.Lock()
			for _, d := range ds {
				t.described.due[scopeBucket{scope, d.Bucket}] = now.Add(time.Minute)
			}
			t.described.mu.Unlock()
		}
	}()
}

// dueAny reports whether a bucket the call charges in scope is due to be
// described; d.mu is held.
func (d *described) dueAny(c *call, scope string, now time.Time) bool {
	for _, ch := range c.endpoint.Charges {
		if at, ok := d.due[scopeBucket{scope, ch.Bucket}]; !ok || !now.Before(at) {
			return true
		}
	}
	return false
}

// description describes a bucket as the Transport enforces it.
func (t *Transport) description(scope, bucket string) quota.Description {
	b := t.cfg.Buckets[bucket]
	d := quota.Description{
		Scope: scope, Bucket: bucket, Limits: t.redis.limits[bucket], InFlight: t.redis.caps[bucket],
		Announced: b.Follows, ReserveUnits: b.ReserveUnits, ReservePercent: b.ReservePercent, Transit: transit(t.cfg.Transit),
	}
	for _, l := range b.Limits {
		d.Quotas = append(d.Quotas, l.Units)
	}
	return d
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

// isQuotaError reports a refusal: Redis answered, so the bucket is worth
// describing. (A function of its own, so that the error's target escapes
// only when there is an error.)
func isQuotaError(err error) bool {
	var qe *QuotaError
	return errors.As(err, &qe)
}
