package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkGrowth measures how a decision's cost grows with each thing it
// could grow with, one at a time, against a PING round trip in the same
// run: the limits a charge checks, the calls already in its window, the
// scopes in Redis, and the callers sharing a client. Every decision
// admits (the limits are never reached), the steady state of a quota with
// room.
func BenchmarkGrowth(b *testing.B) {
	rdb := server(b)
	b.Run("ping", func(b *testing.B) {
		parallel(b, rdb, "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() })
	})

	lim := limiter(b, rdb)
	for _, n := range []int{1, 2, 4, 8} {
		limits := make([]quota.Limit, n)
		for i := range limits { // windows of 1 s, 2 s, 4 s...: each its own keys
			limits[i] = never(time.Second << i)
		}
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: limits}
		b.Run("limits="+strconv.Itoa(n), func(b *testing.B) {
			parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
				_, err := lim.Allow(ctx, "limits-"+strconv.Itoa(n), c)
				return err
			})
		})
	}

	// Calls already in a one-hour window, spread over its first 59 minutes
	// by a clock the benchmark moves; the decisions measured come at the
	// window's 59th minute.
	for _, n := range []int{10, 1000, 100_000, 1_000_000} {
		clock := testclock.New(time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC))
		lim := limiter(b, rdb, quota.WithClock(clock.Now))
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Hour)}}
		scope := "calls-" + strconv.Itoa(n)
		spread(b, lim, clock, scope, c, n, 59*time.Minute)
		entries := logEntries(b, rdb, scope)
		b.Run("calls-in-window="+strconv.Itoa(n), func(b *testing.B) {
			parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
				_, err := lim.Allow(ctx, scope, c)
				return err
			})
			b.ReportMetric(float64(entries), "entries")
		})
	}

	// Scopes taken in turn: a Redis holding a key of each.
	for _, n := range []int{1, 10_000, 1_000_000} {
		scopes := make([]string, n)
		for i := range scopes {
			scopes[i] = "scope-" + strconv.Itoa(n) + "-" + strconv.Itoa(i)
		}
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Hour)}}
		var next atomic.Int64
		allow := func(ctx context.Context, _ int) error {
			_, err := lim.Allow(ctx, scopes[int(next.Add(1))%n], c)
			return err
		}
		if err := rdb.FlushDB(context.Background()).Err(); err != nil { // the keys counted are this case's
			b.Fatal(err)
		}
		spreadScopes(b, n, allow)
		b.Run("scopes="+strconv.Itoa(n), func(b *testing.B) {
			parallel(b, rdb, "evalsha", allow)
			keys, _ := rdb.DBSize(context.Background()).Result()
			b.ReportMetric(float64(keys), "keys")
		})
	}

	for _, n := range []int{1, 8, 50, 200} {
		client := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, PoolSize: n})
		b.Cleanup(func() { client.Close() })
		lim := limiter(b, client)
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Second)}}
		b.Run("callers="+strconv.Itoa(n), func(b *testing.B) {
			parallelBy(b, n, rdb, "evalsha", func(ctx context.Context, _ int) error {
				_, err := lim.Allow(ctx, "callers", c)
				return err
			})
		})
	}
}

// spread admits calls of c in scope, moving clock evenly across d as they
// go, from up to 200 goroutines (sharing the limiter's pipelines; one for
// every hundred calls, so that few calls are also spread).
func spread(tb testing.TB, lim *quota.Limiter, clock *testclock.Clock, scope string, c quota.Demand, calls int, d time.Duration) {
	tb.Helper()
	step := d / time.Duration(calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(200, max(1, calls/100)) {
		wg.Go(func() {
			for next.Add(1) <= int64(calls) {
				r, err := lim.Allow(context.Background(), scope, c)
				if err != nil || !r.OK() {
					tb.Errorf("filling %s: %v, admitted %v", scope, err, err == nil && r.OK())
					return
				}
				clock.Add(step)
			}
		})
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
}

// spreadScopes makes one decision in each of n scopes (through allow,
// which takes them in turn) before they are measured.
func spreadScopes(tb testing.TB, n int, allow func(context.Context, int) error) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := allow(context.Background(), 0); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
}

// windowKeys lists the keys Redis holds for scope (its hash tag), by SCAN.
func windowKeys(tb testing.TB, rdb *redis.Client, scope string) []string {
	tb.Helper()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, quota.DefaultPrefix+"{"+scope+"}:*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Fatal(err)
	}
	return keys
}

// logEntries counts the entries of scope's logs.
func logEntries(tb testing.TB, rdb *redis.Client, scope string) int64 {
	tb.Helper()
	var n int64
	for _, key := range windowKeys(tb, rdb, scope) {
		if t, _ := rdb.Type(context.Background(), key).Result(); t == "list" {
			l, err := rdb.LLen(context.Background(), key).Result()
			if err != nil {
				tb.Fatal(err)
			}
			n += l
		}
	}
	return n
}
