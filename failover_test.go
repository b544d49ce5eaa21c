package tollgate_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// TestClusterFailover kills the master holding a busy scope in a cluster of
// three masters with a replica each. Decisions fail closed while its slots
// have no master, resume by themselves once the replica takes over, and
// never admit more than the limit in any window, before, during or after.
func TestClusterFailover(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, 1)
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cluster.Addrs, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, MaxRetries: 2,
		ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	defer rc.Close()
	ctx := context.Background()
	const scope = "failover"
	master, err := rc.MasterForKey(ctx, "{"+scope+"}") // the slot of every key of the scope
	if err != nil {
		t.Fatal(err)
	}
	var victim *redistest.Server
	for _, n := range cluster.Nodes {
		if n.Addr == master.Options().Addr {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no node at %s", master.Options().Addr)
	}

	// The window outlasts the failover, so that what was admitted before
	// the kill still counts after it.
	const limit = 300
	window := 5 * time.Second
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(limit, window),
		Scope:      tollgate.Scope(scope),
		Policy:     tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.FailFast}, nil),
		OnDecision: d.hook,
	})
	defer tr.Close()
	// Spend at about 400 calls a second, so that calls are being admitted
	// when the master dies: the last of them may not have reached its
	// replica.
	w := startPacedWorkers(t, tr, 8, up.URL+"/v1/items", 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	victim.Kill()
	killed := time.Now()
	var resumed time.Time
	for i := 0; resumed.IsZero() && i < 600; i++ {
		time.Sleep(50 * time.Millisecond)
		for _, ev := range d.list() {
			if ev.Admitted && mode(ev) == "redis" && ev.At.After(killed) {
				resumed = ev.At
				break
			}
		}
	}
	if os.Getenv("TOLLGATE_DEBUG_FAILOVER") != "" {
		keys, _ := rc.Keys(ctx, "*").Result()
		t.Logf("keys after failover: %v", keys)
		for _, k := range keys {
			if strings.HasSuffix(k, ":meta") {
				v, _ := rc.Get(ctx, k).Result()
				t.Logf("%s = %s", k, v)
			}
		}
	}
	time.Sleep(time.Second)
	others := w.finish()
	for _, err := range others {
		t.Errorf("unexpected error: %v", err)
	}
	if resumed.IsZero() {
		info, _ := rc.ClusterNodes(ctx).Result()
		evs := d.list()
		t.Fatalf("decisions never resumed after the master was killed; refused %d unavailable %d; last decision %+v\n%s",
			w.refused.Load(), w.unavailable.Load(), evs[len(evs)-1], info)
	}
	t.Logf("the master of %q was killed; decisions resumed %v later", scope, resumed.Sub(killed).Round(time.Millisecond))

	up.mu.Lock()
	arrivals := slices.Clone(up.arrivals)
	up.mu.Unlock()
	calls := make([]windowcheck.Call, len(arrivals))
	for i, a := range arrivals {
		calls[i] = windowcheck.Call{At: a.at, Units: 1}
	}
	// A few milliseconds of transit forgiven, as in the load test.
	most, at := windowcheck.Most(calls, window-5*time.Millisecond)
	if most > limit {
		t.Errorf("%d units arrived within the window ending %v, over the limit of %d", most, at.Format(time.StampMilli), limit)
	}
	var before, after int
	for _, a := range arrivals {
		if a.at.Before(killed) {
			before++
		} else {
			after++
		}
	}
	t.Logf("%d calls before the kill, %d after; at most %d in a window of %v (limit %d)", before, after, most, window, limit)
	if before == 0 || after == 0 {
		t.Errorf("calls before the kill %d, after %d: want some of each", before, after)
	}
}
