package tollgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// TestLeaseModeSpendsWithoutRoundTrips: with a lease of 50 units, 100
// one-unit requests cost Redis a handful of commands, not 100; Close gives
// back what the last lease did not spend.
func TestLeaseModeSpendsWithoutRoundTrips(t *testing.T) {
	_, rc := realRedis(t)
	var counter commandCounter
	rc.AddHook(&counter)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Minute),
		Lease: func(string, string) (int64, time.Duration) { return 50, time.Minute },
		Trace: tollgate.Trace{Decided: d.hook},
	})
	for range 100 {
		if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
			t.Fatal(err)
		}
	}
	if up.count() != 100 {
		t.Fatalf("the upstream got %d requests, want 100", up.count())
	}
	if counter.n() > 6 {
		t.Errorf("100 leased requests sent %d commands to Redis, want a few", counter.n())
	}
	leased := 0
	for _, ev := range d.list() {
		if ev.Leased {
			leased++
		}
	}
	if leased != 100 {
		t.Errorf("%d of 100 decisions reported leased", leased)
	}
	// Two leases of 50 taken, both spent: 100 counted. A third request takes
	// a third lease, 1 of it spent; Close gives 49 back.
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	pool := quota.PerWindow(1000, time.Minute)
	u, _ := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", pool)
	if u.Used != 150 {
		t.Errorf("used %d with three leases taken, want 150", u.Used)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	u, _ = lim.Usage(context.Background(), tollgate.DefaultScope, "pool", pool)
	if u.Used != 101 {
		t.Errorf("used %d after Close, want the 101 units spent", u.Used)
	}
}

// TestLeaseModeFallsBackWhenNoRoom: when no lease fits, requests decide
// call by call under their policy.
func TestLeaseModeFallsBackWhenNoRoom(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, time.Minute),
		Lease:  func(string, string) (int64, time.Duration) { return 60, time.Minute },
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	defer tr.Close()
	fill(t, lim, tollgate.DefaultScope, 99, 100, time.Minute)
	// A lease gets the one unit left; the request spends it.
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, tr, up.URL+"/v1/items"); err == nil {
		t.Error("a request was admitted with the pool spent")
	}
	if up.count() != 1 {
		t.Errorf("the upstream got %d requests, want 1", up.count())
	}
}
