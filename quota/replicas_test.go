package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

func TestWithReplicasRefusesWhatCannotWork(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second}) // never reached
	defer c.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name    string
		client  redis.UniversalClient
		n       int
		timeout time.Duration
	}{
		{"a negative count", c, -1, 100 * time.Millisecond},
		{"no timeout: WAIT 0 waits forever", c, 1, 0},
		{"under a millisecond", c, 1, 500 * time.Microsecond},
		{"as long as the client's ReadTimeout", c, 1, time.Second},
		{"a Ring, whose shards a WAIT cannot follow", ring, 1, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.client, WithReplicas(tc.n, tc.timeout)); !errors.Is(err, ErrInvalid) {
				t.Errorf("WithReplicas(%d, %v): %v, want ErrInvalid", tc.n, tc.timeout, err)
			}
		})
	}
	if _, err := New(c, WithReplicas(2, 999*time.Millisecond)); err != nil {
		t.Errorf("WithReplicas(2, 999ms) on a client with a 1s ReadTimeout: %v", err)
	}
}

// countedOn returns the units the meta of l's window of lim for scope's
// bucket "b" counts on node (its sum), read at once.
func countedOn(ctx context.Context, node redis.Cmdable, l *Limiter, scope string, lim Limit) (int64, error) {
	meta, err := node.Get(ctx, l.window(scope, "b", lim).meta).Result()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	f, err := readMeta(meta)
	return f.sum, err
}

// decideEverywhere runs 16 goroutines per limiter deciding calls of one
// unit, and checks that the replica counts every decision answered so
// far: each goroutine counts its decision once answered, then reads the
// replica, which must count at least that many. Without WAIT the replica
// lags its master, and it would count fewer now and then.
func decideEverywhere(t *testing.T, lims []*Limiter, scope string, replica redis.Cmdable) int64 {
	t.Helper()
	ctx := context.Background()
	hour := PerWindow(1_000_000, time.Hour)
	c := charge("b", 1, hour, PerDay(1_000_000, time.UTC))
	base, err := countedOn(ctx, replica, lims[0], scope, hour)
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int64
	var wg sync.WaitGroup
	for _, l := range lims {
		for range 16 {
			wg.Go(func() {
				for range 20 {
					r, err := l.Allow(ctx, scope, c)
					if err != nil || !r.OK() {
						t.Errorf("Allow: %v, %v", r, err)
						return
					}
					k := answered.Add(1)
					counted, err := countedOn(ctx, replica, l, scope, hour)
					if err != nil {
						t.Error(err)
						return
					}
					if counted-base < k {
						t.Errorf("%d decisions answered, the replica counts %d", k, counted-base)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return answered.Load()
}

// TestReplicasHaveEveryDecision: with WithReplicas, every decision is on
// the replica when it is answered, decisions alone or sharing pipelines.
// With the replica gone, decisions fail within the timeout as Redis
// failures, give back what they admitted, and Ping fails too; with the
// replica back, all is as before.
func TestReplicasHaveEveryDecision(t *testing.T) {
	master := redistest.Start(t)
	replica := master.StartReplica(t)
	mc, rc := master.Client(t), replica.Client(t)
	const timeout = 200 * time.Millisecond
	shared := mustNew(t, mc, WithReplicas(1, timeout))
	alone := mustNew(t, mc, WithReplicas(1, timeout), WithPipelines(0))
	n := decideEverywhere(t, []*Limiter{shared, alone}, "s", rc)
	if waits := master.Calls(t)["wait"]; waits == 0 || waits > n {
		t.Errorf("%d decisions ran %d WAITs; want at least one, at most one each", n, waits)
	}
	t.Logf("%d decisions, each on the replica when answered; %d WAITs", n, master.Calls(t)["wait"])

	replica.Kill()
	ctx := context.Background()
	lim := PerWindow(100, time.Hour)
	for _, l := range []*Limiter{shared, alone} {
		start := time.Now()
		_, err := l.Allow(ctx, "gone", charge("b", 7, lim))
		if !errors.Is(err, ErrRedis) || !strings.Contains(err.Error(), "reached 0 of 1 replicas within 200ms") {
			t.Errorf("Allow with the replica gone: %v, want a Redis error saying 0 of 1 replicas", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Allow with the replica gone took %v", took)
		}
		if err := l.Ping(ctx, "gone"); !errors.Is(err, ErrRedis) {
			t.Errorf("Ping with the replica gone: %v, want ErrRedis", err)
		}
	}
	plain := mustNew(t, mc)
	var used int64
	for range 100 { // the units go back on a goroutine of their own
		if used = mustUsage(t, plain, "gone", "b", lim).Used; used == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if used != 0 {
		t.Errorf("%d units still counted for decisions that failed; want them given back", used)
	}

	replica.Restart(t)
	master.WaitOnline(t, replica)
	if err := shared.Ping(ctx, "gone"); err != nil {
		t.Errorf("Ping with the replica back: %v", err)
	}
	decideEverywhere(t, []*Limiter{shared}, "back", rc)
}

// TestReplicasOnTheScopesMaster: on a cluster, each decision's WAIT runs
// on the master of its scope's slot, after its write on the same
// connection, and the replica of that master has the decision when it is
// answered. A WAIT sent anywhere else would return at once, waiting for
// nothing.
func TestReplicasOnTheScopesMaster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, 1)
	cluster.WaitReplicasSynced(t)
	cc := cluster.Client(t)
	ctx := context.Background()
	l := mustNew(t, cc, WithReplicas(1, time.Second))
	scope := "one-master"
	master, err := cc.MasterForKey(ctx, l.scopeKey(scope))
	if err != nil {
		t.Fatal(err)
	}
	node := cluster.ReplicaOf(t, master.Options().Addr)
	if node == nil {
		t.Fatalf("no replica of %s", master.Options().Addr)
	}
	replica := node.ReadOnlyClient(t)
	n := decideEverywhere(t, []*Limiter{l}, scope, replica)
	for _, node := range cluster.Nodes {
		waits := node.Calls(t)["wait"]
		switch {
		case node.Addr == master.Options().Addr && (waits == 0 || waits > n):
			t.Errorf("the scope's master %s ran %d WAITs for %d decisions", node.Addr, waits, n)
		case node.Addr != master.Options().Addr && waits != 0:
			t.Errorf("node %s, which holds nothing of the scope, ran %d WAITs", node.Addr, waits)
		}
	}
}
