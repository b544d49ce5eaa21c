package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkShares measures what a pace and shares cost Redis: decisions
// on one calendar day (a limit no run reaches) from one caller, one round
// trip each, the tenants taking turns, on a redis-server of its own per
// case. It reports the script's time per call (commandstats) and the main
// thread's CPU per decision (INFO cpu): plain (the lean script), paced,
// and with shares among 8 and 64 tenants, paced too.
//
//	cd bench && go test -run '^$' -bench Shares -benchtime 20000x
func BenchmarkShares(b *testing.B) {
	day := quota.PerDay(quota.MaxUnits, time.UTC)
	for _, c := range []struct {
		name    string
		tenants int
		pace    bool
	}{
		{"plain", 0, false},
		{"pace", 0, true},
		{"shares=8", 8, false},
		{"shares=8+pace", 8, true},
		{"shares=64", 64, false},
		{"shares=64+pace", 64, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			rdb := server(b)
			lim := limiter(b, rdb, quota.WithPipelines(0))
			charges := make([]quota.Demand, max(c.tenants, 1))
			var shares *quota.Shares
			if c.tenants > 0 {
				shares = &quota.Shares{Weights: map[string]float64{}}
				for i := range c.tenants {
					shares.Weights[fmt.Sprintf("tenant-%d", i)] = float64(1 + i%3)
				}
			}
			for i := range charges {
				charges[i] = quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{day}, Shares: shares}
				if shares != nil {
					charges[i].Tenant = fmt.Sprintf("tenant-%d", i)
				}
				if c.pace {
					charges[i].Pace = &quota.Pace{Burst: 0.5}
				}
			}
			ctx := context.Background()
			for i := range 2 * len(charges) { // every tenant seen, the scripts loaded
				if _, err := lim.Allow(ctx, "bench", charges[i%len(charges)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			cpu := serverCPU(b, rdb)
			b.ResetTimer()
			for i := range b.N {
				r, err := lim.Allow(ctx, "bench", charges[i%len(charges)])
				if err != nil {
					b.Fatal(err)
				}
				if !r.OK() {
					b.Fatal("refused under a limit no run reaches")
				}
			}
			b.StopTimer()
			b.ReportMetric(serverMicros(b, rdb, "evalsha"), "redis-µs/op")
			b.ReportMetric((serverCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-µs/op")
		})
	}
}
