package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestOperator drives every method of an Operator on a real redis-server,
// reading back what a Limiter wrote: package quota's own tests check the
// operations in depth; these check what ops hands back.
func TestOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := redistest.Start(t)
	lim, err := quota.New(s.Client(t), quota.WithPrefix("ops:"))
	if err != nil {
		t.Fatal(err)
	}
	op := ops.New(lim)

	if got, err := op.Survey(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("Survey of an empty prefix: %+v, %v; want nothing", got, err)
	}
	w := quota.PerWindow(1000, time.Minute)
	if _, err := lim.Allow(ctx, "s", quota.Demand{Bucket: "pool", Units: 5, Limits: []quota.Limit{w}}); err != nil {
		t.Fatal(err)
	}
	d := quota.Description{Scope: "s", Bucket: "pool", Limits: []quota.Limit{w}, InFlight: 3}
	if err := lim.Describe(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Lease(ctx, "s", quota.Demand{Bucket: "pool", Units: 100, Limits: []quota.Limit{w}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.PauseBecause(ctx, "s", "search", time.Hour, "maintenance"); err != nil {
		t.Fatal(err)
	}

	got, err := op.Survey(ctx, "s")
	if err != nil || len(got) != 1 {
		t.Fatalf("Survey: %+v, %v; want one scope", got, err)
	}
	sc := got[0]
	if sc.Scope != "s" || sc.Hashed || sc.Paused || len(sc.Buckets) != 2 {
		t.Fatalf("scope %+v, want s with pool and search", sc)
	}
	pool, search := sc.Buckets[0], sc.Buckets[1]
	if pool.Bucket != "pool" || pool.Description == nil || pool.Description.InFlight != 3 || len(pool.Windows) != 1 || pool.Paused {
		t.Errorf("pool %+v, want described, one window, not paused", pool)
	}
	if search.Bucket != "search" || !search.Paused || search.Description != nil {
		t.Errorf("search %+v, want paused, undescribed", search)
	}

	a, err := op.Activity(ctx, "s", "pool", w)
	if err != nil || a.Leases != 1 || a.Leased != 100 || a.LeasedUntil.Before(a.Now) || a.InFlight != 0 {
		t.Errorf("Activity: %+v, %v; want one lease of 100", a, err)
	}

	desc, ok, err := op.Description(ctx, "s", "pool")
	if err != nil || !ok || desc.InFlight != 3 || len(desc.Limits) != 1 || desc.Limits[0] != w {
		t.Errorf("Description: %+v, %v, %v; want what was described", desc, ok, err)
	}
	if _, ok, err := op.Description(ctx, "s", "search"); ok || err != nil {
		t.Errorf("Description of a bucket never described: %v, %v", ok, err)
	}
	if _, _, err := op.Description(ctx, "", "pool"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Description without a scope: %v, want ErrInvalid", err)
	}

	// A listener applies what it hears; Confirm waits for it.
	ln, err := lim.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for n := range ln.Notices() {
			ln.Applied(ctx, n)
		}
	}()
	var lifted int
	reach, err := op.Confirm(ctx, 5*time.Second, func(ctx context.Context) error {
		var err error
		lifted, err = op.Resume(ctx, "s", "")
		return err
	})
	if err != nil || lifted != 1 || reach != (ops.Reach{Listening: 1, Applied: 1}) {
		t.Errorf("Confirm of a resume: %d lifted, %+v, %v; want 1, reached 1 of 1", lifted, reach, err)
	}
	if p, err := lim.PauseOf(ctx, "s", "search"); err != nil || !p.Until.IsZero() {
		t.Errorf("search after the resume: %+v, %v; want no pause", p, err)
	}
}

// An operator lists what the programs keep in Redis, and lifts a pause.
func ExampleOperator() {
	ctx := context.Background()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb) // the programs' Redis and prefix
	if err != nil {
		log.Fatal(err)
	}
	// What a program did: a call, a description, a pause.
	day := quota.PerWindow(10000, 24*time.Hour)
	if _, err := lim.Allow(ctx, "project-a", quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{day}}); err != nil {
		log.Fatal(err)
	}
	if err := lim.Describe(ctx, quota.Description{Scope: "project-a", Bucket: "pool", Limits: []quota.Limit{day}}); err != nil {
		log.Fatal(err)
	}
	if _, err := lim.PauseBecause(ctx, "project-a", "", time.Hour, "deploy rollback"); err != nil {
		log.Fatal(err)
	}

	op := ops.New(lim)
	scopes, err := op.Survey(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range scopes {
		fmt.Println(s.Scope, "paused:", s.Paused)
		for _, b := range s.Buckets {
			fmt.Println(" ", b.Bucket, b.Windows, b.Description.Limits)
		}
	}
	lifted, err := op.Resume(ctx, "project-a", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pauses lifted:", lifted)
	// Output:
	// project-a paused: true
	//   pool [w24h0m0s] [10000/24h0m0s]
	// pauses lifted: 1
}

// TestSeries: what Series hands back of a window on a real redis-server:
// the usage, as quota.Limiter.Usage reads it, and the slices, oldest
// first, summing to what is used.
func TestSeries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := redistest.Start(t)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	lim, err := quota.New(s.Client(t), quota.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	w := quota.PerWindow(1000, time.Minute)
	for i := range 3 {
		now = now.Add(time.Second)
		if _, err := lim.Allow(ctx, "s", quota.Demand{Bucket: "pool", Units: int64(10 * (i + 1)), Limits: []quota.Limit{w}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ops.New(lim).Series(ctx, "s", "pool", w)
	if err != nil {
		t.Fatal(err)
	}
	u, err := lim.Usage(ctx, "s", "pool", w)
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage != u {
		t.Errorf("Series' usage %+v, Usage %+v", got.Usage, u)
	}
	want := fmt.Sprint([]ops.Slice{{At: now.Add(-2 * time.Second), Units: 10}, {At: now.Add(-time.Second), Units: 20}, {At: now, Units: 30}})
	for i := range got.Slices {
		got.Slices[i].At = got.Slices[i].At.UTC() // as want's, whatever the local zone
	}
	if fmt.Sprint(got.Slices) != want {
		t.Errorf("slices %v, want %v", got.Slices, want)
	}
	if _, err := ops.New(lim).Series(ctx, "s", "pool", quota.Limit{}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Series of an invalid limit: %v, want ErrInvalid", err)
	}
}

// TestSurveyBadDescription: a description holding a value no tollgate
// wrote fails its bucket alone: Survey lists it with Err (ErrFormat) and
// reads every other bucket and scope as usual.
func TestSurveyBadDescription(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := redistest.Start(t)
	rdb := s.Client(t)
	lim, err := quota.New(rdb, quota.WithPrefix("ops:"))
	if err != nil {
		t.Fatal(err)
	}
	w := quota.PerWindow(1000, time.Minute)
	for _, scope := range []string{"a", "b"} {
		if _, err := lim.Allow(ctx, scope, quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{w}}); err != nil {
			t.Fatal(err)
		}
		if err := lim.Describe(ctx, quota.Description{Scope: scope, Bucket: "pool", Limits: []quota.Limit{w}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, "ops:{a}:pool:about", `{"not": "a description"`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := ops.New(lim).Survey(ctx, "")
	if err != nil || len(got) != 2 {
		t.Fatalf("Survey: %+v, %v; want both scopes", got, err)
	}
	for _, sc := range got {
		if len(sc.Buckets) != 1 {
			t.Fatalf("scope %+v, want one bucket", sc)
		}
		b := sc.Buckets[0]
		switch sc.Scope {
		case "a":
			if b.Err == nil || !errors.Is(b.Err, quota.ErrFormat) || b.Description != nil {
				t.Errorf("the bad description: %+v; want Err matching ErrFormat, no Description", b)
			}
		case "b":
			if b.Err != nil || b.Description == nil {
				t.Errorf("the good description: %+v; want it read", b)
			}
		}
	}
}
