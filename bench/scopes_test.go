package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

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
		c := quota.Demand{Bucket: "pool", Units: v.units, Limits: v.limits}
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

// BenchmarkScopesPaired measures what BenchmarkScopes does, fairly on a
// loaded machine: each of 50 callers alternates a tollgate decision and a
// redis_rate decision (writing its state), each on a redis-server of its
// own, over 10,000 scopes and a one-minute window, so that both servers
// meet the same load at the same moments. It reports each server's
// main-thread CPU time per decision (INFO cpu) and script time
// (commandstats), and their ratios. Cases: tollgate with one round trip
// per decision and with shared pipelines, at cost 1 and 100, with one
// limit and two (the minute and a Pacific day).
func BenchmarkScopesPaired(b *testing.B) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	for _, v := range []struct {
		name   string
		opts   []quota.Option
		units  int64
		limits []quota.Limit
	}{
		{"unpipelined/cost=1", []quota.Option{quota.WithPipelines(0)}, 1, []quota.Limit{never(time.Minute)}},
		{"unpipelined/cost=100", []quota.Option{quota.WithPipelines(0)}, 100, []quota.Limit{never(time.Minute)}},
		{"unpipelined/two-limits", []quota.Option{quota.WithPipelines(0)}, 1, []quota.Limit{never(time.Minute), quota.PerDay(quota.MaxUnits, pacific)}},
		{"pipelined/cost=1", nil, 1, []quota.Limit{never(time.Minute)}},
	} {
		b.Run(v.name, func(b *testing.B) {
			tg, rr := server(b), server(b)
			lim := limiter(b, tg, v.opts...)
			peer := redis_rate.NewLimiter(rr)
			c := quota.Demand{Bucket: "pool", Units: v.units, Limits: v.limits}
			var next atomic.Int64
			pair := func(ctx context.Context, _ int) error {
				s := scopes[int(next.Add(1))%n]
				if _, err := lim.Allow(ctx, s, c); err != nil {
					return err
				}
				_, err := peer.AllowN(ctx, s, limit, 1)
				return err
			}
			mine, theirs := pairedCPU(b, n, tg, rr, pair)
			b.ReportMetric(mine, "tollgate-cpu-µs/op")
			b.ReportMetric(theirs, "redis_rate-cpu-µs/op")
			b.ReportMetric(mine/theirs, "cpu-ratio")
			st, sr := serverMicros(b, tg, "evalsha"), serverMicros(b, rr, "evalsha")
			b.ReportMetric(st, "tollgate-redis-µs/op")
			b.ReportMetric(sr, "redis_rate-redis-µs/op")
		})
	}
}

// BenchmarkScopesInTurn measures decisions per second as BenchmarkScopes
// does (50 callers over 10,000 scopes, a one-minute window, cost 1), fairly
// on a shared machine: the cases take turns in rounds of 2,000 decisions,
// each case on a redis-server of its own, so that a change in the
// machine's load falls on every case alike rather than on whichever ran
// then. A case's decisions/s is its decisions over the time its own rounds
// took; its ratio to redis_rate's is reported beside it, with each
// server's main-thread CPU per decision. Cases: redis_rate, tollgate with
// one round trip per decision (WithPipelines(0)), and tollgate with shared
// pipelines, as it ships.
func BenchmarkScopesInTurn(b *testing.B) {
	const n, round = 10_000, 2_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Minute)}}
	type turn struct {
		name  string
		rdb   *redis.Client
		allow func(ctx context.Context, scope string) error
		next  atomic.Int64 // where its callers are among the scopes
		took  time.Duration
		cpu   float64
	}
	rr, one, shared := server(b), server(b), server(b)
	peer := redis_rate.NewLimiter(rr)
	unpipelined, pipelined := limiter(b, one, quota.WithPipelines(0)), limiter(b, shared)
	turns := []*turn{
		{name: "redis_rate", rdb: rr, allow: func(ctx context.Context, s string) error {
			_, err := peer.AllowN(ctx, s, limit, 1)
			return err
		}},
		{name: "tollgate-unpipelined", rdb: one, allow: func(ctx context.Context, s string) error {
			_, err := unpipelined.Allow(ctx, s, c)
			return err
		}},
		{name: "tollgate", rdb: shared, allow: func(ctx context.Context, s string) error {
			_, err := pipelined.Allow(ctx, s, c)
			return err
		}},
	}
	// m decisions of t from the callers, each taking the next scope.
	decide := func(t *turn, m int) {
		var left atomic.Int64
		left.Store(int64(m))
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					s := scopes[int(t.next.Add(1))%n]
					if err := t.allow(context.Background(), s); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	for _, t := range turns {
		decide(t, n) // one decision in every scope: the steady state
		t.cpu = serverCPU(b, t.rdb)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for r, done := 0, 0; done < b.N; r, done = r+1, done+round {
		m := min(round, b.N-done)
		for i := range turns {
			t := turns[(r+i)%len(turns)] // each case first in turn
			start := time.Now()
			decide(t, m)
			t.took += time.Since(start)
		}
	}
	b.StopTimer()
	if b.Failed() {
		return
	}
	base := float64(b.N) / turns[0].took.Seconds()
	for _, t := range turns {
		rate := float64(b.N) / t.took.Seconds()
		b.ReportMetric(rate, t.name+"-decisions/s")
		b.ReportMetric((serverCPU(b, t.rdb)-t.cpu)/float64(b.N), t.name+"-redis-cpu-µs/op")
		if t != turns[0] {
			b.ReportMetric(rate/base, t.name+"-ratio")
		}
	}
}
