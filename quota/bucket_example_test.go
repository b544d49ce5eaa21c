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
