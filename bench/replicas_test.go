package bench

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkReplicas measures what quota.WithReplicas costs a decision on a
// cluster of three masters with a replica each. Each caller alternates the
// same decision (over 64 scopes spread across the masters) on a limiter
// without it and on one with a WAIT for one replica after each write, and
// times each: the two are measured in the same moments, so that the
// machine's other load weighs on both alike. It reports the median time
// of each kind of decision and their ratio. "callers" runs 50 callers at
// once (decisions sharing a pipeline share its WAIT); "alone" runs one.
func BenchmarkReplicas(b *testing.B) {
	cluster := redistest.StartCluster(b, 3, 1)
	cluster.WaitReplicasSynced(b)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs, PoolSize: callers})
	b.Cleanup(func() { rc.Close() })
	c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Minute)}}
	scopes := make([]string, 64)
	for i := range scopes {
		scopes[i] = "s" + strconv.Itoa(i)
	}
	plain := limiter(b, rc)
	durable := limiter(b, rc, quota.WithReplicas(1, 2*time.Second)) // under the 3s ReadTimeout; long enough for a loaded machine

	var mu sync.Mutex
	var plainTimes, durableTimes []time.Duration
	// pair decides once on each limiter, and keeps how long each took.
	pair := func(ctx context.Context, i int, p, d *[]time.Duration) error {
		scope := scopes[i%len(scopes)]
		start := time.Now()
		if _, err := plain.Allow(ctx, scope, c); err != nil {
			return err
		}
		mid := time.Now()
		if _, err := durable.Allow(ctx, scope, c); err != nil {
			return err
		}
		*p, *d = append(*p, mid.Sub(start)), append(*d, time.Since(mid))
		return nil
	}
	report := func(b *testing.B) {
		p, d := median(plainTimes), median(durableTimes)
		b.ReportMetric(float64(p.Nanoseconds())/1e3, "plain-µs/decision")
		b.ReportMetric(float64(d.Nanoseconds())/1e3, "wait-µs/decision")
		b.ReportMetric(float64(d)/float64(p), "wait/plain")
		plainTimes, durableTimes = nil, nil
	}

	b.Run("callers", func(b *testing.B) {
		ctx := context.Background()
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((callers + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			var p, d []time.Duration
			for i := 0; pb.Next(); i++ {
				if err := pair(ctx, i, &p, &d); err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			plainTimes, durableTimes = append(plainTimes, p...), append(durableTimes, d...)
			mu.Unlock()
		})
		report(b)
	})
	b.Run("alone", func(b *testing.B) {
		ctx := context.Background()
		i := 0
		for b.Loop() {
			if err := pair(ctx, i, &plainTimes, &durableTimes); err != nil {
				b.Fatal(err)
			}
			i++
		}
		report(b)
	})
}

// median returns the middle of ds, or 0 when it is empty.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
