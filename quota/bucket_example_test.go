package quota_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

func ExampleTokenBucket() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	now := noon
	lim, err := quota.New(rdb, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}

	// 60 requests a minute, refilled continuously: a burst of 60 at once,
	// then one a second.
	rpm := quota.Demand{Bucket: "requests", Units: 30, Limits: []quota.Limit{quota.TokenBucket(60, 60, time.Minute)}}
	for range 3 {
		r, err := lim.Allow(ctx, "project-a", rpm)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("admitted=%v remaining=%d retry-after=%v\n", r.OK(), r.Remaining(), r.RetryAfter())
	}
	now = now.Add(10 * time.Second) // 10 back, where a sliding window would wait a minute
	u, err := lim.Usage(ctx, "project-a", "requests", rpm.Limits[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("level=%d of %d, full again in %v\n", u.Remaining, u.Limit.Units, u.Reset.Sub(u.Now))
	// Output:
	// admitted=true remaining=30 retry-after=0s
	// admitted=true remaining=0 retry-after=0s
	// admitted=false remaining=0 retry-after=30s
	// level=10 of 60, full again in 50s
}

func ExampleReservation_SettleAll() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb, quota.WithClock(func() time.Time { return noon }))
	if err != nil {
		log.Fatal(err)
	}

	// An LLM request charges its requests, input tokens (estimated from
	// the prompt) and output tokens (its max_tokens) at once.
	r, err := lim.Allow(ctx, "project-a",
		quota.Demand{Bucket: "requests", Units: 1, Limits: []quota.Limit{quota.TokenBucket(50, 50, time.Minute)}},
		quota.Demand{Bucket: "input", Units: 1200, Limits: []quota.Limit{quota.TokenBucket(30000, 30000, time.Minute)}},
		quota.Demand{Bucket: "output", Units: 4096, Limits: []quota.Limit{quota.TokenBucket(8000, 8000, time.Minute)}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("output left before the answer:", r.RemainingOf("output"))

	// The answer's usage tells both token counts: one round trip settles them.
	if err := r.SettleAll(ctx, map[string]int64{"input": 1180, "output": 312}); err != nil {
		log.Fatal(err)
	}
	for _, b := range []struct {
		bucket string
		limit  quota.Limit
	}{{"input", quota.TokenBucket(30000, 30000, time.Minute)}, {"output", quota.TokenBucket(8000, 8000, time.Minute)}} {
		u, err := lim.Usage(ctx, "project-a", b.bucket, b.limit)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d used\n", b.bucket, u.Used)
	}
	// Output:
	// output left before the answer: 3904
	// input: 1180 used
	// output: 312 used
}
