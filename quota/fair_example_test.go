package quota_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

func ExamplePace() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	now := time.Date(2026, 5, 1, 6, 0, 0, 0, time.UTC)
	lim, err := quota.New(rdb, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}

	// 2,400 units a day, a tenth of them free at midnight, the rest spread
	// over the day: by 06:00, 240 + 2160/4 = 780.
	day := quota.Demand{Bucket: "pool", Units: 780, Limits: []quota.Limit{quota.PerDay(2400, time.UTC)},
		Pace: &quota.Pace{Burst: 0.1}}
	r, err := lim.Allow(ctx, "project-a", day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("780 at 06:00: admitted=%v\n", r.OK())
	day.Units = 90 // the line gains 90 units an hour
	r, err = lim.Allow(ctx, "project-a", day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("90 more: admitted=%v retry-after=%v\n", r.OK(), r.RetryAfter())
	// Output:
	// 780 at 06:00: admitted=true
	// 90 more: admitted=false retry-after=1h0m0s
}

func ExampleShares() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	now := time.Date(2026, 5, 1, 6, 0, 0, 0, time.UTC)
	lim, err := quota.New(rdb, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}

	// 100 units a day among two regions, eu weighing 3: 75 and 25.
	shares := &quota.Shares{Weights: map[string]float64{"eu": 3, "us": 1}}
	spend := func(tenant string, units int64) {
		c := quota.Demand{Bucket: "pool", Units: units, Limits: []quota.Limit{quota.PerDay(100, time.UTC)}, Shares: shares, Tenant: tenant}
		r, err := lim.Allow(ctx, "project-a", c)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %d: admitted=%v\n", tenant, units, r.OK())
	}
	spend("eu", 75)
	spend("eu", 1) // beyond its share: us keeps its 25
	spend("us", 25)
	// Output:
	// eu 75: admitted=true
	// eu 1: admitted=false
	// us 25: admitted=true
}
