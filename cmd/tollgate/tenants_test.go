package main

import (
	"context"
	"errors"
	"fmt"
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

// TestStatusTenantsWaiting: a tenant at its share whose request must wait
// waits in the bucket's room, holding nothing; status and the page show
// it waiting beside what it spent, in text, in JSON and in the tenants'
// table.
func TestStatusTenantsWaiting(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lim := e.limiter(t, nil)
	// A fixed window of a day, now at its middle: its end is far from
	// the instants the test runs at.
	win := quota.PerFixedWindow(100, 24*time.Hour, time.Now().Add(12*time.Hour))
	shares := &quota.Shares{Weights: map[string]float64{"eu": 1, "us": 1}}
	charge := func(tenant string, units int64) quota.Demand {
		return quota.Demand{Bucket: "pool", Units: units, Limits: []quota.Limit{win}, Shares: shares, Tenant: tenant}
	}
	if err := lim.Describe(ctx, quota.Description{Scope: "project-a", Bucket: "pool", Limits: []quota.Limit{win}, Shares: shares}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant string
		units  int64
	}{{"eu", 50}, {"us", 20}} {
		if r, err := lim.Allow(ctx, "project-a", charge(c.tenant, c.units)); err != nil || !r.OK() {
			t.Fatalf("%s's %d units: %v, %v", c.tenant, c.units, r, err)
		}
	}
	// eu has spent its share of 50, and us keeps its 30 unspent: eu's 10
	// more fit only when the window ends, so eu waits in the room.
	waited := make(chan error, 1)
	go func() {
		r, err := lim.Reserve(ctx, "project-a", 48*time.Hour, charge("eu", 10))
		if err == nil && r.OK() {
			err = fmt.Errorf("admitted at %v while us keeps its share", r.Time())
		}
		waited <- err
	}()
	var out string
	for range 500 {
		code, o, errs := cmd(t, nil, "status", "-redis", e.url)
		if code != 0 || errs != "" {
			t.Fatalf("status: exit %d, stderr %q", code, errs)
		}
		if out = o; strings.Contains(out, "waiting") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out, "tenants of fixed 24h0m0s: eu 50 of 50 (1 waiting), us 20 of 50\n") {
		t.Errorf("status does not show eu's request waiting in the room:\n%s", out)
	}
	code, out, errs := cmd(t, nil, "status", "-json", "-redis", e.url)
	flat := strings.Join(strings.Fields(out), "")
	if code != 0 || errs != "" || !strings.Contains(flat, `"name":"eu","units":50,"share":50,`) ||
		!strings.Contains(flat, `"waiting":1}`) || strings.Count(flat, `"waiting":`) != 1 {
		t.Errorf("status -json: exit %d, stderr %q, eu not waiting once:\n%s", code, errs, out)
	}
	base, _ := startWeb(t, e, "")
	_, page := fetch(t, base+"/")
	if !strings.Contains(page, "<tr><td>eu</td><td>50</td><td>50</td><td>0</td><td>1</td></tr><tr><td>us</td><td>20</td><td>50</td><td>0</td><td>0</td></tr>") {
		t.Errorf("the page's tenants of the window do not show eu waiting:\n%s", page)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("eu's wait ended with %v, want it cancelled", err)
	}
}
