package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// TestMillionCallsMemory: a million calls of cost 1, spread evenly over
// one one-hour window (so that every slice of it holds calls), hold at
// most 64 KiB of Redis memory (MEMORY USAGE of the scope's keys, every
// element counted): the window's thousand slices bound it, whatever the
// call rate. Format 1 kept an entry a call, 35.6 bytes each: 36 MB.
// It sends the calls from 200 goroutines in shared pipelines (about half
// a minute on two cores): run it with
//
//	go test -run TestMillionCallsMemory -v
func TestMillionCallsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a million decisions")
	}
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 200})
	defer rdb.Close()
	clock := testclock.New(time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC))
	lim, err := quota.New(rdb, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Hour)}}
	const calls = 1_000_000
	spread(t, lim, clock, "million", c, calls, time.Hour-time.Second)

	var bytes int64
	for _, key := range windowKeys(t, rdb, "million") {
		n, err := rdb.MemoryUsage(context.Background(), key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		bytes += n
	}
	entries := logEntries(t, rdb, "million")
	u, err := lim.Usage(context.Background(), "million", "pool", c.Limits[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls: %d entries, %d bytes of Redis memory (%.3f a call)", calls, entries, bytes, float64(bytes)/calls)
	if u.Used != calls {
		t.Errorf("the window counts %d units, want %d", u.Used, calls)
	}
	if entries > 1001 {
		t.Errorf("%d entries, want at most one a slice (1,000 in a window)", entries)
	}
	if bytes > 64<<10 {
		t.Errorf("%d bytes, want at most 64 KiB", bytes)
	}
}

// TestMillionCallsAsFastAsTheyCome: a million calls of cost 1 made as fast
// as 50 callers sharing pipelines can, on Redis's own clock, in one
// one-hour window, hold under 1 MB of Redis memory (every key of the
// scope, every element counted). About half a minute on two cores: run it
// with
//
//	go test -run TestMillionCallsAsFastAsTheyCome -v
func TestMillionCallsAsFastAsTheyCome(t *testing.T) {
	if testing.Short() {
		t.Skip("a million decisions")
	}
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: callers})
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Hour)}}
	const calls = 1_000_000
	var next atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= calls {
				if _, err := lim.Allow(context.Background(), "fast", c); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var bytes int64
	keys := windowKeys(t, rdb, "fast")
	for _, key := range keys {
		n, err := rdb.MemoryUsage(context.Background(), key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		bytes += n
	}
	u, err := lim.Usage(context.Background(), "fast", "pool", c.Limits[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls: %d keys, %d entries, %d bytes of Redis memory", calls, len(keys), logEntries(t, rdb, "fast"), bytes)
	if u.Used != calls {
		t.Errorf("the window counts %d units, want %d", u.Used, calls)
	}
	if bytes >= 1<<20 {
		t.Errorf("%d bytes, want under 1 MB", bytes)
	}
}

// BenchmarkTrim measures the worst decision trimming can make: a full
// one-hour window holding an entry in each of its thousand slices, all
// but the newest expired when a call needs the room, so that one decision
// trims 999 entries (a call trims at most 16 batches of 128: a window's
// slices twice over, so a longer backlog carried over from format 1 is
// trimmed across several calls). Each op fills a scope (untimed), then
// times that one decision; "plain" is the same decision in a window of
// the same entries with room left and nothing expired, and "ping" the
// round trip that bounds them.
func BenchmarkTrim(b *testing.B) {
	rdb := server(b)
	const slices = 1000
	window := time.Hour
	slice := window / slices
	lim1 := quota.PerWindow(slices, window)
	b.Run("ping", func(b *testing.B) {
		for range b.N {
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, trim := range []bool{false, true} {
		name := "plain"
		if trim {
			name = "backlog-999"
		}
		b.Run(name, func(b *testing.B) {
			var worst, total float64
			for i := range b.N {
				b.StopTimer()
				t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
				clock := testclock.New(t0)
				lim := limiter(b, rdb, quota.WithClock(clock.Now))
				scope := name + "-" + strconv.Itoa(i)
				c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{lim1}}
				fill := slices
				if !trim {
					fill = slices - 1 // room left for the decision
				}
				for range fill {
					if r, err := lim.Allow(context.Background(), scope, c); err != nil || !r.OK() {
						b.Fatalf("filling: %v", err)
					}
					clock.Add(slice)
				}
				if trim { // all but the newest entry expired
					clock.Set(t0.Add(window + (slices-2)*slice + time.Millisecond))
				}
				before := commandStat(b, rdb, "evalsha", "usec")
				b.StartTimer()
				r, err := lim.Allow(context.Background(), scope, c)
				b.StopTimer()
				if err != nil || !r.OK() {
					b.Fatalf("the decision: %v, admitted %v", err, err == nil && r.OK())
				}
				us := commandStat(b, rdb, "evalsha", "usec") - before
				worst = max(worst, us)
				total += us
				if trim {
					if n := logEntries(b, rdb, scope); n > 2 {
						b.Fatalf("%d entries left after the decision, want the expired ones trimmed", n)
					}
				}
				rdb.Del(context.Background(), windowKeys(b, rdb, scope)...)
			}
			b.ReportMetric(total/float64(b.N), "redis-µs/op")
			b.ReportMetric(worst, "worst-redis-µs")
		})
	}
}
