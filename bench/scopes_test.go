package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkScopes measures decisions the way Redis meets them where many
// scopes share it: 50 callers in one process over 10,000 scopes taken in
// turn, a one-minute window, every decision admitting, each case after
// one decision in every scope (the steady state: a scope's keys are made
// once a minute at most, not at each call). Over 10,000 scopes
// a scope is visited less often than once a slice of its window (60 ms),
// so almost every decision opens a slice. Each case reports decisions/s
// and, what bounds a Redis that serves many processes, the CPU time of
// Redis's main thread per decision (redis-cpu-µs/op) and the script's own
// time (redis-µs/op); read each against redis_rate's in the same run.
// Cases: redis_rate's GCRA (one round trip per decision, its only way),
// and the same with a rate so high that it writes nothing;
// tollgate with one round trip per decision (WithPipelines(0)) at cost 1
// and 100 and with two limits (the minute and a Pacific day); and tollgate
// with shared pipelines, as it ships.
func BenchmarkScopes(b *testing.B) {
	rdb := server(b)
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	// Callers take the scopes in turn, wherever another left off.
	var next atomic.Int64
	scope := func() string { return scopes[int(next.Add(1))%n] }

	rr := redis_rate.NewLimiter(rdb)
	for _, v := range []struct {
		name  string
		limit redis_rate.Limit
	}{
		// A million a minute per scope: never reached here, and every
		// decision writes the scope's new instant, as a GCRA must.
		{"redis_rate", redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}},
		// 2^40 a minute, as BenchmarkDecisions asks: a call's share of the
		// minute (55 ps) is below what a double of the clock can hold, so
		// the decision reads the scope's key, finds none, and writes
		// nothing. A floor, not a peer's decision.
		{"redis_rate-writing-nothing", redis_rate.Limit{Rate: 1 << 40, Burst: 1 << 40, Period: time.Minute}},
	} {
		b.Run(v.name, func(b *testing.B) {
			allow := func(ctx context.Context, _ int) error {
				_, err := rr.AllowN(ctx, scope(), v.limit, 1)
				return err
			}
			spreadScopes(b, n, allow)
			parallel(b, rdb, "evalsha", allow)
		})
	}
	one := limiter(b, rdb, quota.WithPipelines(0))
	shared := limiter(b, rdb)
	for _, v := range []struct {
		name   string
		lim    *quota.Limiter
		units  int64
		limits []quota.Limit
	}{
		{"tollgate-unpipelined/cost=1", one, 1, []quota.Limit{never(time.Minute)}},
		{"tollgate-unpipelined/cost=100", one, 100, []quota.Limit{never(time.Minute)}},
		{"tollgate-unpipelined/two-limits", one, 1, []quota.Limit{never(time.Minute), quota.PerDay(quota.MaxUnits, pacific)}},
		{"tollgate/cost=1", shared, 1, []quota.Limit{never(time.Minute)}},
	} {
		c := quota.Charge{Bucket: "pool", Units: v.units, Limits: v.limits}
		b.Run(v.name, func(b *testing.B) {
			allow := func(ctx context.Context, _ int) error {
				_, err := v.lim.Allow(ctx, scope(), c)
				return err
			}
			spreadScopes(b, n, allow)
			parallel(b, rdb, "evalsha", allow)
		})
	}
}
