package quota

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// callers is how many goroutines share the limiter in the benchmarks.
const callers = 50

// runParallel runs op from callers goroutines and reports decisions/s.
func runParallel(b *testing.B, op func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkReserve measures decisions per second against a real
// redis-server on loopback, from 50 goroutines, beside a PING round trip:
// the ceiling one round trip per decision allows. Costs 1 and 100 should
// run at the same rate, since a call writes one entry whatever its cost.
//
//	go test ./quota -run '^$' -bench Reserve -benchmem
func BenchmarkReserve(b *testing.B) {
	s := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: callers})
	b.Cleanup(func() { client.Close() })
	l := mustNew(b, client)

	b.Run("ping", func(b *testing.B) {
		runParallel(b, func(ctx context.Context) error { return client.Ping(ctx).Err() })
	})
	for _, cost := range []int64{1, 100} {
		b.Run("cost="+strconv.FormatInt(cost, 10), func(b *testing.B) {
			// A limit no run reaches, over a one-second window: every call is
			// admitted and entries leave the log as fast as they arrive.
			c := charge("pool", cost, PerWindow(MaxUnits, time.Second))
			sc := "bench-" + strconv.FormatInt(cost, 10)
			runParallel(b, func(ctx context.Context) error {
				r, err := l.Allow(ctx, sc, c)
				if err == nil && !r.OK() {
					b.Fatal("refused under a limit no run reaches")
				}
				return err
			})
		})
	}
}
