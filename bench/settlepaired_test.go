package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tollgate/tollgate/quota"
)

// nothing is a script that does nothing: a round trip's floor for a
// settlement, which is a script.
var nothing = redis.NewScript("return 0")

// getset is a script that reads a key and writes it back, as a
// settlement reads and writes a window's meta, and does nothing else.
var getset = redis.NewScript(`redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]) or 'x', 'KEEPTTL') return 0`)

// BenchmarkSettledPaired measures Redis's CPU for a request admitted at
// an estimate and settled to its true cost, against redis_rate's for one
// decision, as BenchmarkScopesPaired measures a plain decision: each of 50
// callers alternates a tollgate request and a redis_rate decision, each
// on a redis-server of its own, over 10,000 scopes, one round trip per
// call (WithPipelines(0)), every decision admitting. Cases: settled (one
// window, 100 estimated, 17 settled); llm (a model's requests, input and
// output tokens as token buckets in one charge, then the two token counts
// settled in one call, Reservation.SettleAll); llm/one-by-one (the same,
// settled with one Settle per bucket); settled/floor (the settled case's
// decision, then in place of its settlement a script that does nothing,
// on the same server: what two round trips cost Redis before a
// settlement does any work, the least a settled request can cost call by
// call). Each case runs again under
// "pipelined", with the shared pipelines tollgate ships with (decisions
// and settlements of callers at the same moment share a write and a
// read), against the same redis_rate decisions.
func BenchmarkSettledPaired(b *testing.B) {
	bucket := quota.TokenBucket(1_000_000, 1_000_000, time.Minute) // never reached
	settled := []quota.Demand{{Bucket: "pool", Units: 100, Limits: []quota.Limit{never(time.Minute)}}}
	llm := []quota.Demand{
		{Bucket: "requests", Units: 1, Limits: []quota.Limit{bucket}},
		{Bucket: "input", Units: 1000, Limits: []quota.Limit{bucket}},
		{Bucket: "output", Units: 1000, Limits: []quota.Limit{bucket}},
	}
	for _, v := range []struct {
		name    string
		charges []quota.Demand
		settle  func(ctx context.Context, r *quota.Reservation, rdb *redis.Client) error
	}{
		{"settled", settled,
			func(ctx context.Context, r *quota.Reservation, _ *redis.Client) error {
				return r.Settle(ctx, "pool", 17)
			}},
		{"settled/floor", settled, func(ctx context.Context, _ *quota.Reservation, rdb *redis.Client) error {
			return nothing.Run(ctx, rdb, nil).Err()
		}},
		{"settled/getset", settled, func(ctx context.Context, _ *quota.Reservation, rdb *redis.Client) error {
			return getset.Run(ctx, rdb, []string{"settled/getset"}).Err()
		}},
		{"llm", llm, func(ctx context.Context, r *quota.Reservation, _ *redis.Client) error {
			return r.SettleAll(ctx, map[string]int64{"input": 700, "output": 200})
		}},
		{"llm/one-by-one", llm, func(ctx context.Context, r *quota.Reservation, _ *redis.Client) error {
			if err := r.Settle(ctx, "input", 700); err != nil {
				return err
			}
			return r.Settle(ctx, "output", 200)
		}},
	} {
		for _, pipelined := range []bool{false, true} {
			if pipelined && strings.HasPrefix(v.name, "settled/") {
				continue // their scripts have a round trip of their own
			}
			name := v.name
			if pipelined {
				name = "pipelined/" + name
			}
			b.Run(name, func(b *testing.B) {
				pairedWithRedisRate(b, pipelined, func(lim *quota.Limiter, rdb *redis.Client) func(ctx context.Context, s string) error {
					return func(ctx context.Context, s string) error {
						r, err := lim.Allow(ctx, s, v.charges...)
						if err != nil || !r.OK() {
							return refusedOr(err)
						}
						return v.settle(ctx, r, rdb)
					}
				})
			})
		}
	}
}
