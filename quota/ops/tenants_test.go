package ops_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestTenants: Tenants reads what each tenant of a day with shares spent
// today and holds tomorrow, names of any bytes included.
func TestTenants(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	clock := testclock.New(time.Date(2026, 4, 2, 23, 0, 0, 0, time.UTC))
	l, err := quota.New(c, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := quota.PerDay(10, time.UTC)
	shares := &quota.Shares{Weights: map[string]float64{"eu": 1, "odd\nname:7;": 1}}
	charge := func(tenant string, units int64) quota.Demand {
		return quota.Demand{Bucket: "b", Units: units, Limits: []quota.Limit{day}, Shares: shares, Tenant: tenant}
	}
	if r, err := l.Allow(ctx, "s", charge("eu", 3)); err != nil || !r.OK() {
		t.Fatalf("eu's 3 units: %v, %v", r, err)
	}
	if r, err := l.Allow(ctx, "s", charge("odd\nname:7;", 2)); err != nil || !r.OK() {
		t.Fatalf("the odd name's 2 units: %v, %v", r, err)
	}
	// Beyond its share of 5 today: a hold at tomorrow's midnight.
	if r, err := l.Reserve(ctx, "s", 2*time.Hour, charge("eu", 4)); err != nil || !r.OK() || r.Time().Hour() != 0 {
		t.Fatalf("eu's hold: %v, %v", r, err)
	}
	got, err := ops.New(l).Tenants(ctx, "s", "b", day, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "eu" || got[0].Units != 3 || got[0].Held != 4 || !got[0].Seen.Equal(clock.Now()) ||
		got[1].Name != "odd\nname:7;" || got[1].Units != 2 || got[1].Held != 0 {
		t.Errorf("tenants: %+v; want eu 3 and 4 held, the odd name 2", got)
	}
	if got, err := ops.New(l).Tenants(ctx, "s", "b", quota.PerWindow(10, time.Minute), clock.Now()); err != nil || len(got) != 0 {
		t.Errorf("a sliding window's tenants: %v, %v; want none", got, err)
	}
	// A description keeps the bucket's pace and shares.
	shares.Lendable, shares.Idle = 0.5, time.Minute
	if err := l.Describe(ctx, quota.Description{Scope: "s", Bucket: "b", Limits: []quota.Limit{day}, Pace: &quota.Pace{Burst: 0.25}, Shares: shares}); err != nil {
		t.Fatal(err)
	}
	d, ok, err := ops.New(l).Description(ctx, "s", "b")
	if err != nil || !ok || d.Pace == nil || d.Pace.Burst != 0.25 || d.Shares == nil || d.Shares.Lendable != 0.5 ||
		d.Shares.Idle != time.Minute || d.Shares.Weights["odd\nname:7;"] != 1 || len(d.Shares.Weights) != 2 {
		t.Errorf("the description read back: %+v (pace %+v, shares %+v), %v, %v", d, d.Pace, d.Shares, ok, err)
	}
}

// TestTenantsWaiting: Tenants counts, beside what each tenant spent, its
// calls waiting in the bucket's room, interactive and background, and
// stops counting them once they leave it.
func TestTenantsWaiting(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	clock := testclock.New(time.Date(2026, 4, 2, 12, 0, 0, 0, time.UTC))
	l, err := quota.New(c, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	day := quota.PerDay(10, time.UTC)
	shares := &quota.Shares{Weights: map[string]float64{"eu": 1, "us": 1}}
	charge := func(tenant string, units int64) quota.Demand {
		return quota.Demand{Bucket: "b", Units: units, Limits: []quota.Limit{day}, Shares: shares, Tenant: tenant}
	}
	for _, ch := range []quota.Demand{charge("eu", 5), charge("us", 1)} {
		if r, err := l.Allow(ctx, "s", ch); err != nil || !r.OK() {
			t.Fatalf("%s's %d units: %v, %v", ch.Tenant, ch.Units, r, err)
		}
	}
	// eu is at its share of 5 and us keeps its 4 unspent: eu's calls
	// fit only at midnight, so both wait in the room.
	done := make(chan error, 2)
	for _, cctx := range []context.Context{ctx, quota.WithPriority(ctx, quota.Background)} {
		go func() {
			_, err := l.Reserve(cctx, "s", 24*time.Hour, charge("eu", 2))
			done <- err
		}()
	}
	var got []ops.Tenant
	for range 500 {
		if got, err = ops.New(l).Tenants(ctx, "s", "b", day, clock.Now()); err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 && got[0].Waiting == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 2 || got[0].Name != "eu" || got[0].Units != 5 || got[0].Waiting != 2 || got[1].Name != "us" || got[1].Waiting != 0 {
		t.Fatalf("tenants: %+v; want eu's 5 units and 2 calls waiting, us's none", got)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a wait ended with %v, want it cancelled", err)
		}
	}
	got, err = ops.New(l).Tenants(context.Background(), "s", "b", day, clock.Now())
	if err != nil || len(got) != 2 || got[0].Waiting != 0 {
		t.Errorf("tenants once the calls left the room: %+v, %v; want none waiting", got, err)
	}
}
