package quota_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// The examples decide on a fixed clock so that their output is stable; a
// real program leaves the clock to Redis.
var noon = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return noon }

func Example() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb, quota.WithClock(fixedClock)) // or redis.NewClient(...): any Redis
	if err != nil {
		log.Fatal(err)
	}

	// A search costs 100 units of a pool that allows 250 a minute.
	search := quota.Demand{Bucket: "pool", Units: 100, Limits: []quota.Limit{quota.PerWindow(250, time.Minute)}}
	for range 3 {
		r, err := lim.Allow(ctx, "project-a", search)
		if err != nil {
			log.Fatal(err) // Redis failed or the charge is invalid
		}
		fmt.Printf("admitted=%v remaining=%d retry-after=%v\n", r.OK(), r.Remaining(), r.RetryAfter())
	}
	// Output:
	// admitted=true remaining=150 retry-after=0s
	// admitted=true remaining=50 retry-after=0s
	// admitted=false remaining=50 retry-after=1m0s
}

func ExampleLimiter_Reserve() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb, quota.WithClock(fixedClock))
	if err != nil {
		log.Fatal(err)
	}

	perSecond := quota.PerWindow(10, time.Second)
	lim.Allow(ctx, "project-a", quota.Demand{Bucket: "pool", Units: 10, Limits: []quota.Limit{perSecond}})

	// The window is full: take a hold up to 5s ahead instead of being refused.
	r, err := lim.Reserve(ctx, "project-a", 5*time.Second, quota.Demand{Bucket: "pool", Units: 4, Limits: []quota.Limit{perSecond}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", r.OK(), "act in:", r.Delay())
	// Changed our mind: give the units back.
	if err := r.Cancel(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// held: true act in: 1s
}

func ExampleLimiter_Wait() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	hourly := quota.Demand{Bucket: "pool", Units: 60, Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}
	for i := range 2 {
		_, err := lim.Wait(ctx, "project-a", hourly)
		var refused *quota.RefusedError
		switch {
		case errors.As(err, &refused):
			// Room comes back in about an hour, after the 30s deadline:
			// Wait says so at once instead of sleeping until the deadline.
			fmt.Printf("call %d: refused, retry in about %v\n", i, refused.RetryAfter.Round(time.Hour))
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("call %d: admitted\n", i)
		}
	}
	// Output:
	// call 0: admitted
	// call 1: refused, retry in about 1h0m0s
}

func ExampleLimiter_Usage() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb, quota.WithClock(fixedClock))
	if err != nil {
		log.Fatal(err)
	}

	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		log.Fatal(err)
	}
	day := quota.PerDay(9500, pacific) // 10,000 a day, less a 5% reserve
	lim.Allow(ctx, "project-a", quota.Demand{Bucket: "pool", Units: 100, Limits: []quota.Limit{day}})

	u, err := lim.Usage(ctx, "project-a", "pool", day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("used:", u.Used, "remaining:", u.Remaining, "resets:", u.Reset.In(pacific).Format(time.DateTime+" MST"))
	// Output:
	// used: 100 remaining: 9400 resets: 2026-03-03 00:00:00 PST
}

func ExampleCostError() {
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	upload := quota.Demand{Bucket: "pool", Units: 1600, Limits: []quota.Limit{quota.PerWindow(1000, time.Hour)}}
	_, err = lim.Allow(context.Background(), "project-a", upload)
	fmt.Println(errors.Is(err, quota.ErrCostExceedsLimit))
	fmt.Println(err)
	// Output:
	// true
	// quota: 1600 units for bucket "pool" exceed limit 1000/1h0m0s
}

func ExampleWithPipelines() {
	ctx := context.Background()
	// Two pipelines in flight at most: the calls that arrive meanwhile share
	// the next round trip. WithPipelines(0) would give each its own.
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb, quota.WithClock(fixedClock), quota.WithPipelines(2))
	if err != nil {
		log.Fatal(err)
	}

	perMinute := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{quota.PerWindow(30, time.Minute)}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r, err := lim.Allow(ctx, "project-a", perMinute)
			if err != nil {
				log.Fatal(err)
			}
			if r.OK() {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println("admitted", admitted.Load(), "of 50")
	// Output:
	// admitted 30 of 50
}
