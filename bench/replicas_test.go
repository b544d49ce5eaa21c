package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkReplicas measures what quota.WithReplicas costs a decision on a
// cluster of three masters with a replica each: the same decisions, over
// 64 scopes spread across the masters, without it and with a WAIT for one
// replica after each write. "callers" runs 50 callers at once (decisions
// sharing a pipeline share its WAIT); "alone" runs one caller, whose
// ns/op is the latency of one decision.
func BenchmarkReplicas(b *testing.B) {
	cluster := redistest.StartCluster(b, 3, 1)
	cluster.WaitReplicasSynced(b)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs, PoolSize: callers})
	b.Cleanup(func() { rc.Close() })
	c := quota.Charge{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Minute)}}
	scopes := make([]string, 64)
	for i := range scopes {
		scopes[i] = "s" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name string
		opts []quota.Option
	}{
		{"plain", nil},
		{"wait-1", []quota.Option{quota.WithReplicas(1, 500*time.Millisecond)}},
	} {
		lim := limiter(b, rc, tc.opts...)
		b.Run(tc.name+"/callers", func(b *testing.B) {
			parallel(b, nil, "", func(ctx context.Context, i int) error {
				_, err := lim.Allow(ctx, scopes[i%len(scopes)], c)
				return err
			})
		})
		b.Run(tc.name+"/alone", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(ctx, scopes[i%len(scopes)], c); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
