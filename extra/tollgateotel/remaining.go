package tollgateotel

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate/quota"
)

// A UsageReader reads how much of each limit of a bucket is spent in a
// scope: *tollgate.Transport, and the provider Transports that embed one.
type UsageReader interface {
	Usage(ctx context.Context, scope, bucket string) ([]quota.Usage, error)
}

// maxSeen bounds the scope buckets the quota gauges read, each once per
// collection.
const maxSeen = 1000

// usageTimeout bounds the reads of one collection, so that a Redis that
// does not answer cannot hold the exporter.
const usageTimeout = 5 * time.Second

// remaining is what the quota gauges read: the Transport, and the scope
// buckets it has decided for.
type remaining struct {
	reader atomic.Pointer[UsageReader]
	seen   cowMap[scopeBucket, struct{}]
}

type scopeBucket struct{ scope, bucket string }

// Observe makes the quota gauges (tollgate.quota.remaining and .limit)
// read tr's usage, through tr.Usage, once per collection for each scope
// and bucket the instrumented Transport has decided for. Until it is
// called they report nothing.
func (m *Metrics) Observe(tr UsageReader) {
	m.remaining.reader.Store(&tr)
}

// see notes that a decision charged bucket in scope.
func (r *remaining) see(scope, bucket string) {
	k := scopeBucket{scope, bucket}
	if _, ok, n := r.seen.load(k); !ok && n < maxSeen {
		r.seen.add(k, struct{}{}, maxSeen)
	}
}

// gaugeKey is one point of the quota gauges.
type gaugeKey struct{ scope, bucket, window string }

// observeQuota reads the usage of every scope bucket seen and observes
// what is left of each limit, and the limit; without WithScopes, per
// bucket and window, the scope with the fewest units left.
func (m *Metrics) observeQuota(ctx context.Context, o metric.Observer, left, limit metric.Int64Observable) {
	rp, seen := m.remaining.reader.Load(), m.remaining.seen.snapshot()
	if rp == nil || len(seen) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	points := make(map[gaugeKey]quota.Usage)
	for k := range seen {
		usage, err := (*rp).Usage(ctx, k.scope, k.bucket)
		if err != nil {
			continue // Redis is down, or the collection's time is up: no point rather than a stale one
		}
		for _, u := range usage {
			g := gaugeKey{bucket: k.bucket, window: windowName(u.Limit)}
			if m.scopes {
				g.scope = k.scope
			}
			if p, ok := points[g]; !ok || u.Remaining < p.Remaining {
				points[g] = u
			}
		}
	}
	for g, u := range points {
		opts := m.with(byBucketWindow, g.bucket, g.window, g.scope)
		o.ObserveInt64(left, u.Remaining, opts.observe...)
		o.ObserveInt64(limit, u.Limit.Units, opts.observe...)
	}
}

// windowName names a limit's window as the Transport enforces it, e.g.
// "day@America/Los_Angeles", "fixed 1h0m0s", or "10.05s" for a sliding
// window of 10s lengthened by Transit.
func windowName(l quota.Limit) string {
	switch {
	case l.Calendar:
		if l.Location == nil {
			return "day"
		}
		return "day@" + l.Location.String()
	case l.Fixed:
		return "fixed " + l.Window.String()
	}
	return l.Window.String()
}
