package bench

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkServerTime measures what one decision costs Redis, tollgate's
// against redis_rate's, as fairly as a shared machine allows: one caller
// alternates the two, call by call, each on a redis-server of its own, so
// that both meet the same load at the same moments, and each server's
// INFO commandstats times its own decisions alone. It reports both times
// and their ratio.
func BenchmarkServerTime(b *testing.B) {
	for _, cost := range []int{1, 100} {
		b.Run("cost="+map[int]string{1: "1", 100: "100"}[cost], func(b *testing.B) {
			ctx := context.Background()
			tg := redistest.Start(b).Client(b)
			rr := redistest.Start(b).Client(b)
			lim := limiter(b, tg, quota.WithPipelines(0))
			peer := redis_rate.NewLimiter(rr)
			c := quota.Demand{Bucket: "pool", Units: int64(cost), Limits: []quota.Limit{never(time.Hour)}}
			// A billion an hour: never reached, and a call's share (3.6 µs)
			// large enough for the peer's clock to hold, so that it writes.
			limit := redis_rate.Limit{Rate: 1_000_000_000, Burst: 1_000_000_000, Period: time.Hour}
			for _, r := range []*redis.Client{tg, rr} {
				r.ConfigResetStat(ctx)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := lim.Allow(ctx, "hot", c); err != nil {
					b.Fatal(err)
				}
				if _, err := peer.AllowN(ctx, "hot", limit, cost); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			mine, theirs := serverMicros(b, tg, "evalsha"), serverMicros(b, rr, "evalsha")
			b.ReportMetric(mine, "tollgate-redis-µs")
			b.ReportMetric(theirs, "redis_rate-redis-µs")
			b.ReportMetric(mine/theirs, "ratio")
		})
	}
}
