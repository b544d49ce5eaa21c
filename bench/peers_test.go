package bench

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// callers is how many goroutines share the client in every case.
const callers = 50

// parallel runs op from callers goroutines and reports decisions/s, and,
// given a client, the server's own time per call of the command cmd (from
// INFO commandstats) and its main thread's CPU time per op (INFO cpu):
// what one decision costs Redis's single thread.
func parallel(b *testing.B, rdb *redis.Client, cmd string, op func(ctx context.Context, i int) error) {
	b.Helper()
	parallelBy(b, callers, rdb, cmd, op)
}

// parallelBy is parallel with n goroutines: one runs op in a loop, more
// are rounded up to a multiple of GOMAXPROCS.
func parallelBy(b *testing.B, n int, rdb *redis.Client, cmd string, op func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	var cpu float64
	if rdb != nil {
		rdb.ConfigResetStat(ctx)
		cpu = serverCPU(b, rdb)
	}
	b.ReportAllocs()
	mine := clientCPU(b)
	b.ResetTimer()
	if n == 1 {
		for i := range b.N {
			if err := op(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((n + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if err := op(ctx, i); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric((clientCPU(b)-mine)/float64(b.N), "client-cpu-µs/op")
	if rdb != nil {
		b.ReportMetric(serverMicros(b, rdb, cmd), "redis-µs/op")
		b.ReportMetric((serverCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-µs/op")
	}
}

// serverCPU reads the CPU time (µs) Redis's main thread has used:
// redistest.MainThreadCPU.
func serverCPU(b *testing.B, rdb *redis.Client) float64 { return redistest.MainThreadCPU(b, rdb) }

// clientCPU reads the CPU time (µs) this process has used, every thread
// (the callers, the client, the runtime) in user and system mode: beside
// Redis's, where a machine's cores go. Redis servers the benchmark starts
// are processes of their own and are not counted.
func clientCPU(b *testing.B) float64 {
	cpu, err := processCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// serverMicros reads the server's time per call of cmd since the last reset.
func serverMicros(b *testing.B, rdb *redis.Client, cmd string) float64 {
	return commandStat(b, rdb, cmd, "usec_per_call")
}

// commandStat reads one field of cmd's line in INFO commandstats.
func commandStat(b *testing.B, rdb *redis.Client, cmd, field string) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_"+cmd+":") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
	}
	return 0
}

// server starts one redis-server for a benchmark and a client with a
// connection per caller.
func server(b *testing.B) *redis.Client {
	s := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: callers})
	b.Cleanup(func() { c.Close() })
	return c
}

// limiter returns a quota.Limiter on rdb or fails the benchmark.
func limiter(b *testing.B, rdb redis.UniversalClient, opts ...quota.Option) *quota.Limiter {
	l, err := quota.New(rdb, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// transport returns a tollgate.Transport built from cfg or fails the
// benchmark, and closes it when the benchmark ends.
func transport(b *testing.B, cfg tollgate.Config) *tollgate.Transport {
	tr, err := tollgate.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

// never is a limit no run reaches: every decision admits, the steady state
// of a quota with room.
func never(window time.Duration) quota.Limit { return quota.PerWindow(quota.MaxUnits, window) }

func BenchmarkDecisions(b *testing.B) {
	rdb := server(b)
	rr := redis_rate.NewLimiter(rdb)
	lim := limiter(b, rdb)
	pacific, _ := time.LoadLocation("America/Los_Angeles")

	b.Run("ping", func(b *testing.B) {
		parallel(b, rdb, "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() })
	})
	for _, n := range []int{1, 100} {
		b.Run("redis_rate/n="+strconv.Itoa(n), func(b *testing.B) {
			// Ten million a second: never reached, and a call's share of
			// the second (0.1 µs) is one the peer's clock (a double of
			// seconds since 2017) can hold, so that every decision writes,
			// as a GCRA must. (At 2^40 a second the share rounds away and
			// the peer writes nothing: see BenchmarkScopes.)
			limit := redis_rate.Limit{Rate: 10_000_000, Burst: 10_000_000, Period: time.Second}
			parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
				_, err := rr.AllowN(ctx, "peer", limit, n)
				return err
			})
		})
	}
	// tollgate as it ships, concurrent decisions sharing pipelines, and with
	// one round trip per decision as redis_rate makes.
	for _, v := range []struct {
		name string
		lim  *quota.Limiter
	}{{"tollgate", lim}, {"tollgate-unpipelined", limiter(b, rdb, quota.WithPipelines(0))}} {
		for _, cost := range []int64{1, 100} {
			b.Run(v.name+"/cost="+strconv.FormatInt(cost, 10), func(b *testing.B) {
				c := quota.Demand{Bucket: "pool", Units: cost, Limits: []quota.Limit{never(time.Second)}}
				parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
					_, err := v.lim.Allow(ctx, "hot", c)
					return err
				})
			})
		}
		b.Run(v.name+"/two-limits", func(b *testing.B) {
			c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{quota.PerDay(quota.MaxUnits, pacific), never(time.Hour)}}
			parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
				_, err := v.lim.Allow(ctx, "two", c)
				return err
			})
		})
	}
	b.Run("tollgate/10000-scopes", func(b *testing.B) {
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Second)}}
		scopes := make([]string, 10000)
		for i := range scopes {
			scopes[i] = "scope-" + strconv.Itoa(i)
		}
		parallel(b, rdb, "evalsha", func(ctx context.Context, i int) error {
			_, err := lim.Allow(ctx, scopes[(i*7919)%len(scopes)], c)
			return err
		})
	})
}
