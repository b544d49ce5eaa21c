package spend

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkRequestPath: what the request's path pays the Recorder for a
// (scope, bucket, endpoint, caller) already seen, in parallel: run with
// -benchmem (0 allocs/op).
func BenchmarkRequestPath(b *testing.B) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	r, err := New(c, Options{Process: "p"})
	if err != nil {
		b.Fatal(err)
	}
	r.Spend("scope", "pool", "search.list", "php-cron", 1)
	r.Refuse("scope", "pool", "search.list", "php-cron", NoRoom)
	r.BeginWait("scope", "pool", "php-cron", t0).End()
	b.Run("Spend", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Spend("scope", "pool", "search.list", "php-cron", 100)
			}
		})
	})
	b.Run("Refuse", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Refuse("scope", "pool", "search.list", "php-cron", NoRoom)
			}
		})
	})
	b.Run("BeginWait+End", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.BeginWait("scope", "pool", "php-cron", t0).End()
			}
		})
	})
}
