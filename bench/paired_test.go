package bench

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"
)

// pairedCPU runs a paired benchmark: pair, which makes one call on each
// of two redis-servers (one, then other), first once in each of n scopes
// (so that every scope's keys exist, as in steady state), then b.N times
// from 50 callers. It returns each server's main-thread CPU (INFO cpu) per
// pair, so that both meet the same load at the same moments.
func pairedCPU(b *testing.B, n int, one, other *redis.Client, pair func(ctx context.Context, _ int) error) (float64, float64) {
	b.Helper()
	spreadScopes(b, n, pair)
	ctx := context.Background()
	for _, r := range []*redis.Client{one, other} {
		r.ConfigResetStat(ctx)
	}
	cpuOne, cpuOther := serverCPU(b, one), serverCPU(b, other)
	b.ResetTimer()
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := pair(ctx, 0); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	return (serverCPU(b, one) - cpuOne) / float64(b.N), (serverCPU(b, other) - cpuOther) / float64(b.N)
}
