package lease

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// TestRenewSpendLive: a renewal grants a lease and spends from it; later
// requests spend from it with no round trip until it runs out; and the
// lease is live for its term on the clock its user gives (the
// Transport's, which tests move), not on the wall clock.
func TestRenewSpendLive(t *testing.T) {
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // years from the wall clock
	now := func() time.Time { return t0 }
	const term = time.Minute
	k := Key{"s", "pool"}
	want := quota.Demand{Bucket: "pool", Units: 3, Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}
	grant := func(ctx context.Context) (*quota.Lease, error) { return lim.Lease(ctx, "s", want, term) }
	var l Leases
	defer l.EndAll(ctx)
	if l.Live(t0) || l.Spend(k, 1) {
		t.Fatal("live, or spent from, before any lease")
	}
	at, ok, err := l.Renew(ctx, k, 1, now, term, grant, func(err error) { t.Errorf("ending: %v", err) })
	if !ok || err != nil || !at.Equal(t0) {
		t.Fatalf("Renew = %v, %v, %v; want %v, true, nil", at, ok, err, t0)
	}
	if !l.Spend(k, 2) || l.Spend(k, 1) {
		t.Error("the lease of 3 did not hold 1 + 2 units, or held more")
	}
	for _, c := range []struct {
		at   time.Time
		live bool
	}{{t0, true}, {t0.Add(term - time.Nanosecond), true}, {t0.Add(term), false}} {
		if got := l.Live(c.at); got != c.live {
			t.Errorf("Live(t0+%v) = %v, want %v", c.at.Sub(t0), got, c.live)
		}
	}
	l.End(ctx, func(Key) bool { return true })
	if l.Live(t0) {
		t.Error("live after End")
	}
}
