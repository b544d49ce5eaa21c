package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkCappedPaired measures Redis's CPU for a capped request (a
// GitHub request: units in a window and a slot of a cap of requests in
// flight, held until its response ends) against redis_rate's for one
// decision, as BenchmarkSettledPaired does. Cases: plain (a decision
// alone, the 1.0x it must keep); capped (units and slot in one script,
// ReserveCapped, then the slot freed, Release); capped/apart (the slot
// taken, then the units, then the slot freed: the three round trips a
// capped request cost before ReserveCapped); capped-settled (ReserveCapped,
// then the settlement frees the slot, SettleAndRelease); capped-settled/
// apart (TakeSlot, Allow, Settle, Release); settled (Allow, Settle: a
// settled request with no cap, for reference).
func BenchmarkCappedPaired(b *testing.B) {
	window := []quota.Limit{never(time.Minute)}
	core := quota.Demand{Bucket: "core", Units: 100, Limits: window}
	caps := []quota.Cap{{Bucket: "concurrent", N: 100}}
	apart := func(ctx context.Context, lim *quota.Limiter, s string, settle bool) error {
		slot, err := lim.TakeSlot(ctx, s, "concurrent", 100, 0)
		if err != nil {
			return err
		}
		r, err := lim.Allow(ctx, s, core)
		if err != nil || !r.OK() {
			return refusedOr(err)
		}
		if settle {
			if err := r.Settle(ctx, "core", 17); err != nil {
				return err
			}
		}
		return slot.Release(ctx)
	}
	together := func(ctx context.Context, lim *quota.Limiter, s string, settle bool) error {
		r, slots, err := lim.ReserveCapped(ctx, s, 0, caps, core)
		if err != nil || !r.OK() {
			return refusedOr(err)
		}
		if settle {
			return r.SettleAndRelease(ctx, map[string]int64{"core": 17}, slots...)
		}
		return slots[0].Release(ctx)
	}
	for _, v := range []struct {
		name string
		op   func(ctx context.Context, lim *quota.Limiter, s string) error
	}{
		{"plain", func(ctx context.Context, lim *quota.Limiter, s string) error {
			r, err := lim.Allow(ctx, s, core)
			if err != nil || !r.OK() {
				return refusedOr(err)
			}
			return nil
		}},
		{"capped", func(ctx context.Context, lim *quota.Limiter, s string) error { return together(ctx, lim, s, false) }},
		{"capped/apart", func(ctx context.Context, lim *quota.Limiter, s string) error { return apart(ctx, lim, s, false) }},
		{"capped-settled", func(ctx context.Context, lim *quota.Limiter, s string) error { return together(ctx, lim, s, true) }},
		{"capped-settled/apart", func(ctx context.Context, lim *quota.Limiter, s string) error { return apart(ctx, lim, s, true) }},
		{"settled", func(ctx context.Context, lim *quota.Limiter, s string) error {
			r, err := lim.Allow(ctx, s, core)
			if err != nil || !r.OK() {
				return refusedOr(err)
			}
			return r.Settle(ctx, "core", 17)
		}},
	} {
		b.Run(v.name, func(b *testing.B) { pairedWithRedisRate(b, v.op) })
	}
}

// pairedWithRedisRate runs request (one tollgate request in scope s, on a
// limiter with one round trip per call) and a redis_rate decision in
// turn, from callers goroutines, each on a redis-server of its own, over
// 10,000 scopes warmed first, and reports each server's main-thread CPU
// per request and their ratio.
func pairedWithRedisRate(b *testing.B, request func(ctx context.Context, lim *quota.Limiter, s string) error) {
	const n = 10_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	tg, rr := server(b), server(b)
	lim := limiter(b, tg, quota.WithPipelines(0))
	peer := redis_rate.NewLimiter(rr)
	var next atomic.Int64
	pair := func(ctx context.Context, _ int) error {
		s := scopes[int(next.Add(1))%n]
		if err := request(ctx, lim, s); err != nil {
			return err
		}
		_, err := peer.AllowN(ctx, s, limit, 1)
		return err
	}
	spreadScopes(b, n, pair)
	ctx := context.Background()
	for _, r := range []*redis.Client{tg, rr} {
		r.ConfigResetStat(ctx)
	}
	cpuTG, cpuRR := serverCPU(b, tg), serverCPU(b, rr)
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
	mine, theirs := (serverCPU(b, tg)-cpuTG)/float64(b.N), (serverCPU(b, rr)-cpuRR)/float64(b.N)
	b.ReportMetric(mine, "tollgate-cpu-µs/request")
	b.ReportMetric(theirs, "redis_rate-cpu-µs/op")
	b.ReportMetric(mine/theirs, "cpu-ratio")
}
