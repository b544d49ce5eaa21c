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
	"github.com/tollgate/tollgate/quota"
)

// TestClusterFailover kills the master holding a busy scope in a cluster of
// three masters with a replica each. Decisions fail closed while its slots
// have no master, resume by themselves once the replica takes over, and
// never admit more than the limit in any window, before, during or after.
// With quota.WithReplicas, no decision admitted before the kill is lost:
// each is in the log of the replica that took over. (Without it, the last
// milliseconds of them may be; the run says how many were.) A master with
// no replica left acknowledges no write there, so decisions resume once
// the killed node is back, as the new master's replica.
func TestClusterFailover(t *testing.T) {
	t.Run("asynchronous", func(t *testing.T) { clusterFailover(t, 300, 5*time.Second, nil) })
	t.Run("WithReplicas", func(t *testing.T) {
		clusterFailover(t, 1200, 20*time.Second, quota.WithReplicas(1, 500*time.Millisecond))
	})
}

// clusterFailover runs the failover test with limit units per window; a
// durable option makes it require every admitted decision to survive,
// with window long enough that none has left its log by the end.
func clusterFailover(t *testing.T, limit int64, window time.Duration, durable quota.Option) {
	cluster := redistest.StartCluster(t, 3, 1)
	cluster.WaitReplicasSynced(t)
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

	replica := cluster.ReplicaOf(t, victim.Addr)
	if replica == nil {
		t.Fatalf("no replica of %s", victim.Addr)
	}

	// The window outlasts the failover, so that what was admitted before
	// the kill still counts after it.
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc, durable), Costs: table(t), Buckets: buckets(limit, window),
		Scope:  tollgate.Scope(scope),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Decided: d.hook},
	})
	defer tr.Close()
	// Spend at about 400 calls a second, so that calls are being admitted
	// when the master dies: the last of them may not have reached its
	// replica.
	w := startPacedWorkers(t, tr, 8, up.URL+"/v1/items", 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	victim.Kill()
	killed := time.Now()
	if durable != nil {
		// Once the replica has taken over, the killed node comes back
		// (empty) as its replica, so that it has one to acknowledge writes.
		waitRole(t, replica, "master")
		victim.Restart(t)
	}
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
	lost, admitted, ok := lostDecisions(t, tr, scope, window, d.list())
	switch {
	case durable != nil && !ok:
		t.Errorf("the run outlasted its window of %v: the count cannot show what was lost", window)
	case durable != nil && lost > 0:
		t.Errorf("%d of %d decisions admitted were lost in the failover", lost, admitted)
	case !ok:
		t.Logf("%d decisions admitted; the run outlasted its window, so what was lost is not known", admitted)
	default:
		t.Logf("%d of %d admitted decisions lost in the failover", lost, admitted)
	}
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
	// A few milliseconds forgiven for the trip from admission to arrival:
	// the Transport's default Transit (50ms) lengthens its windows by more.
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

// waitRole waits, up to 30 seconds, until node reports role (INFO
// replication's "master" or "slave").
func waitRole(t *testing.T, node *redistest.Server, role string) {
	t.Helper()
	c := node.Client(t)
	for range 600 {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "role:"+role+"\r") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became %s", node.Addr, role)
}

// lostDecisions compares the decisions Redis admitted for the pool of
// scope, one unit each, with the units the pool's window counts now on
// the scope's master, as tr reads them (Redis format 2 merges calls by
// slice, so single decisions cannot be told apart, but none leaves the
// count before the window has passed). It returns how many admitted
// decisions the count lacks and how many were admitted, or ok false when
// the oldest of them is no longer in the window, and the count says
// nothing of it.
func lostDecisions(t *testing.T, tr *tollgate.Transport, scope string, window time.Duration, all []tollgate.Decision) (lost, admitted int64, ok bool) {
	t.Helper()
	var usage []quota.Usage
	var err error
	for range 50 { // until the client's slot map names the new master
		if usage, err = tr.Usage(context.Background(), scope, "pool"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || len(usage) != 1 {
		t.Fatalf("the pool's usage in %q: %+v, %v", scope, usage, err)
	}
	oldest := time.Now()
	for _, ev := range all {
		if ev.Admitted && mode(ev) == "redis" && !ev.Leased {
			admitted++
			if ev.At.Before(oldest) {
				oldest = ev.At
			}
		}
	}
	if time.Since(oldest) > window-time.Second {
		return 0, admitted, false
	}
	return max(admitted-usage[0].Used, 0), admitted, true
}
