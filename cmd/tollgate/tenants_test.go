package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// TestStatusTenants: a paced day with shares shows its pace line by now,
// and what each tenant spent in it against its share, and holds for the
// next, in text and in JSON.
func TestStatusTenants(t *testing.T) {
	e := newEnv(t)
	clock := testclock.New(time.Date(2026, 11, 2, 23, 0, 0, 0, time.UTC))
	ctx := context.Background()
	lim := e.limiter(t, clock.Now)
	day := quota.PerDay(100, time.UTC)
	shares := &quota.Shares{Weights: map[string]float64{"eu": 1, "us": 1}}
	pace := &quota.Pace{Burst: 0.5}
	for _, c := range []struct {
		tenant string
		units  int64
	}{{"eu", 30}, {"us", 20}, {"eu", 25}} {
		r, err := lim.Reserve(ctx, "project-a", 2*time.Hour, quota.Demand{Bucket: "pool", Units: c.units, Limits: []quota.Limit{day}, Pace: pace, Shares: shares, Tenant: c.tenant})
		if err != nil || !r.OK() {
			t.Fatalf("%s's %d units: %v, %v", c.tenant, c.units, r, err)
		}
	}
	if err := lim.Describe(ctx, quota.Description{Scope: "project-a", Bucket: "pool", Limits: []quota.Limit{day}, Pace: pace, Shares: shares}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cmd(t, clock.Now, "status", "-redis", e.url)
	if code != 0 || errs != "" {
		t.Fatalf("status: exit %d, stderr %q", code, errs)
	}
	// At 23:00, the pace line is at 50 + 50·23/24 = 97, each share at
	// 48.5: eu's 25 more wait for tomorrow.
	if !strings.Contains(out, "pace of day UTC: 97 of 100 may be spent by now") ||
		!strings.Contains(out, "tenants of day UTC: eu 30 of 48 (+25 held later), us 20 of 48") ||
		!strings.Contains(out, "the pace holds it back") || strings.Contains(out, "before the reset") {
		t.Errorf("status does not show the tenants:\n%s", out)
	}
	code, out, errs = cmd(t, clock.Now, "status", "-json", "-redis", e.url)
	if code != 0 || errs != "" || !strings.Contains(strings.Join(strings.Fields(out), ""), `"tenants":[{"name":"eu","units":30,"share":48.5,"held_later":25`) {
		t.Errorf("status -json: exit %d, stderr %q, no tenants:\n%s", code, errs, out)
	}
}
