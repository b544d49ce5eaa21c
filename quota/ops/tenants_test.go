package ops_test

import (
	"context"
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
