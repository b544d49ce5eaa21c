package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkSettle compares a decision that is settled to its true cost
// after the response (Allow, then Settle: two round trips) with a plain
// decision, beside the PING round trip.
func BenchmarkSettle(b *testing.B) {
	rdb := server(b)
	lim := limiter(b, rdb)
	c := quota.Demand{Bucket: "pool", Units: 100, Limits: []quota.Limit{never(time.Second)}}
	b.Run("ping", func(b *testing.B) {
		parallel(b, rdb, "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() })
	})
	b.Run("plain", func(b *testing.B) {
		parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
			_, err := lim.Allow(ctx, "plain", c)
			return err
		})
	})
	b.Run("settled", func(b *testing.B) {
		parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
			r, err := lim.Allow(ctx, "settled", c)
			if err != nil {
				return err
			}
			return r.Settle(ctx, "pool", 17)
		})
	})
}

// BenchmarkSlot compares taking and releasing a slot of a concurrency cap
// (two round trips, with the cap never reached) with the PING round trip.
func BenchmarkSlot(b *testing.B) {
	rdb := server(b)
	lim := limiter(b, rdb)
	b.Run("ping", func(b *testing.B) {
		parallel(b, rdb, "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() })
	})
	b.Run("take-release", func(b *testing.B) {
		parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
			s, err := lim.TakeSlot(ctx, "capped", "pool", 1000, 0)
			if err != nil {
				return err
			}
			return s.Release(ctx)
		})
	})
}
