package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testLeaseFromShare: a lease on a bucket with shares is taken from its
// tenant's part and charged to it: a asks for 80 of a day of 100 shared
// with b and is granted its 50, b's guarantee stands, and what a's lease
// did not spend goes back to a when it ends.
func testLeaseFromShare(t *testing.T, b *backend) {
	ctx := context.Background()
	d := newSharedDay(t, b, 100, time.Hour)
	clock, l, s, charge, allow := d.clock, d.l, d.scope, d.charge, d.allow
	ls, err := l.Lease(ctx, s, charge("a", 80), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Granted() != 50 {
		t.Fatalf("a's lease of 80 granted %d units, want its share of 50", ls.Granted())
	}
	if allow("a", 1) {
		t.Fatal("a admitted beyond its share while its lease holds it")
	}
	if _, err := l.Lease(ctx, s, charge("a", 10), time.Minute); err == nil {
		t.Fatal("a second lease of a's granted beyond its share")
	}
	if !allow("b", 50) {
		t.Fatal("b's share refused while a's lease runs")
	}
	if !ls.Take(20) {
		t.Fatal("a's lease refused 20 of its 50 units")
	}
	clock.Add(time.Second)
	if err := ls.End(ctx); err != nil {
		t.Fatal(err)
	}
	if !allow("a", 30) {
		t.Fatal("the 30 units a's lease did not spend were not given back to a")
	}
	if allow("a", 1) {
		t.Fatal("a admitted beyond its share after its lease ended")
	}
	ts, err := l.tenants(ctx, s, "b", PerDay(100, time.UTC), clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Units != 50 {
			t.Errorf("tenant %s spent %d units, want 50", x.Name, x.Units)
		}
	}
}

// testLeaseWithinPace: a lease on a paced day is granted no more than the
// pace line allows now, all its units counted from the grant.
func testLeaseWithinPace(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	c := Demand{Bucket: "b", Units: 900, Limits: []Limit{PerDay(1000, time.UTC)}, Pace: &Pace{Burst: 0.1}}
	ls, err := l.Lease(ctx, s, c, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// At noon the line is at 100 + 900/2.
	if ls.Granted() != 550 {
		t.Fatalf("a lease of 900 at noon granted %d units, want the line's 550", ls.Granted())
	}
	c.Units = 1
	if r, err := l.Allow(ctx, s, c); err != nil || r.OK() {
		t.Fatalf("a unit beyond the line while the lease holds it: OK=%v err=%v", r.OK(), err)
	}
}
