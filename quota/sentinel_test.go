package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestSentinelClientWaitsForAReplicaByDefault: a limiter on a Sentinel
// failover client waits for one replica within DefaultReplicaTimeout;
// WithReplicas says otherwise, WithReplicas(0, 0) not at all; a plain
// client does not wait. A failover client whose ReadTimeout leaves no room
// for the default is refused, naming WithReplicas.
func TestSentinelClientWaitsForAReplicaByDefault(t *testing.T) {
	fo := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer fo.Close()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	for _, tc := range []struct {
		name    string
		client  redis.UniversalClient
		opts    []Option
		n       int
		timeout time.Duration
	}{
		{"sentinel", fo, nil, 1, DefaultReplicaTimeout},
		{"sentinel, two replicas", fo, []Option{WithReplicas(2, time.Second)}, 2, time.Second},
		{"sentinel, none", fo, []Option{WithReplicas(0, 0)}, 0, 0},
		{"plain", plain, nil, 0, 0},
	} {
		l := mustNew(t, tc.client, tc.opts...)
		if l.replicas.n != tc.n || l.replicas.timeout != tc.timeout {
			t.Errorf("%s: waits for %d replicas within %v, want %d within %v", tc.name, l.replicas.n, l.replicas.timeout, tc.n, tc.timeout)
		}
	}
	short := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ReadTimeout: 200 * time.Millisecond})
	defer short.Close()
	if _, err := New(short); !errors.Is(err, ErrInvalid) {
		t.Errorf("New on a failover client with a 200ms ReadTimeout: %v, want ErrInvalid naming WithReplicas", err)
	}
}

// failoverRun is what one run of decisions through a failover did.
type failoverRun struct {
	acknowledged int64 // decisions answered admitted
	counted      int64 // what the promoted replica counts for them
	failed       int64 // decisions that failed while no master answered
	took         time.Duration
}

// decideThroughFailover runs 16 goroutines deciding one-unit calls on l
// (a limiter on set's failover client), kills the master with SIGKILL
// (its links to the replicas cut at once) after 400ms, waits for the sentinels to promote a replica and for 50
// more decisions to be admitted there, then stops and reads what the new
// master counts.
func decideThroughFailover(t *testing.T, set *redistest.Sentinels, l *Limiter) failoverRun {
	t.Helper()
	ctx := context.Background()
	hour := PerWindow(1_000_000_000, time.Hour)
	c := charge("b", 1, hour)
	var run failoverRun
	var acked, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := l.Allow(ctx, "s", c)
				switch {
				case err == nil && r.OK():
					acked.Add(1)
				case err == nil:
					t.Errorf("refused: %+v", r)
					return
				case errors.Is(err, ErrRedis):
					failed.Add(1)
					time.Sleep(10 * time.Millisecond)
				default:
					t.Errorf("Allow: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(400 * time.Millisecond)
	old := set.Master.Addr
	start := time.Now()
	set.KillMaster()
	promoted := set.WaitPromoted(t, old)
	atPromotion := acked.Load()
	for deadline := time.Now().Add(20 * time.Second); acked.Load() < atPromotion+50; {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no decision admitted on the promoted master %s within 20s (%d failed)", promoted.Addr, failed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	run.took = time.Since(start)
	close(stop)
	wg.Wait()
	run.acknowledged, run.failed = acked.Load(), failed.Load()
	var err error
	if run.counted, err = countedOn(ctx, promoted.Client(t), l, "s", hour); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestSentinelFailoverLosesNoAcknowledgedDecision: on a master with two
// replicas 2ms away (a delaying proxy on each link) and three sentinels,
// a limiter on the Sentinel URL's failover
// client (replica acknowledgement by default) decides from 16 goroutines
// while the master is killed with SIGKILL; the sentinels promote a replica,
// the client follows it, and the promoted replica counts every decision
// that was answered admitted. The same run with WithReplicas(0, 0), on a
// set of its own, says how many acknowledged decisions the promotion
// lost: a figure, not a failure (how many depends on the machine's
// speed).
func TestSentinelFailoverLosesNoAcknowledgedDecision(t *testing.T) {
	const lag = 2 * time.Millisecond
	set := redistest.StartSentinelLinked(t, 2, redistest.Options{})
	set.SetLag(lag)
	l := mustNew(t, set.Client(t))
	if l.replicas.n != 1 {
		t.Fatalf("a limiter on a Sentinel client waits for %d replicas, want 1", l.replicas.n)
	}

	with := decideThroughFailover(t, set, l)
	t.Logf("with replica acknowledgement: %d decisions acknowledged, %d counted by the promoted replica, %d failed during the failover (%v from the kill to 50 admitted on the new master)",
		with.acknowledged, with.counted, with.failed, with.took.Round(10*time.Millisecond))
	if with.counted < with.acknowledged {
		t.Errorf("the promoted replica counts %d decisions of %d acknowledged: %d lost", with.counted, with.acknowledged, with.acknowledged-with.counted)
	}

	bare := redistest.StartSentinelLinked(t, 2, redistest.Options{})
	bare.SetLag(lag)
	without := decideThroughFailover(t, bare, mustNew(t, bare.Client(t), WithReplicas(0, 0)))
	t.Logf("without: %d decisions acknowledged, %d counted by the promoted replica: %d lost (%.3f%%)",
		without.acknowledged, without.counted, max(without.acknowledged-without.counted, 0),
		100*float64(max(without.acknowledged-without.counted, 0))/float64(without.acknowledged))
}

// TestSentinelHoldsSurviveAFailover: callers waiting for their turn hold
// their place in Redis; with the replica acknowledgement the holds are on
// the replica when the callers are told their instant, so a master killed
// while they wait leaves them in place on the promoted replica: a caller
// arriving after the failover queues behind them instead of taking their
// units again, and a waiter that gives up after the failover gives its
// units back on the new master.
func TestSentinelHoldsSurviveAFailover(t *testing.T) {
	set := redistest.StartSentinel(t, 2, redistest.Options{})
	l := mustNew(t, set.Client(t))
	ctx := context.Background()
	window := PerWindow(10, 30*time.Second)
	c := func(units int64) Demand { return charge("b", units, window) }
	if r, err := l.Allow(ctx, "w", c(10)); err != nil || !r.OK() {
		t.Fatalf("Allow 10 of 10: %v, %v", r, err)
	}
	holds := make([]*Reservation, 5)
	for i := range holds {
		r, err := l.Reserve(ctx, "w", time.Minute, c(2))
		if err != nil || !r.OK() || r.Delay() < 20*time.Second {
			t.Fatalf("Reserve 2 behind a full window: %v, %v", r, err)
		}
		holds[i] = r
	}
	set.Master.Kill()
	promoted := set.WaitPromoted(t, set.Master.Addr)
	node := promoted.Client(t)
	if n, err := countedOn(ctx, node, l, "w", window); err != nil || n != 20 {
		t.Fatalf("the promoted replica counts %d units (%v), want the 10 admitted and the 10 held", n, err)
	}
	var late *Reservation
	for i := 0; ; i++ { // the client finds the new master as it reconnects
		var err error
		if late, err = l.Reserve(ctx, "w", 2*time.Minute, c(1)); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("Reserve after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	last := holds[len(holds)-1].Time()
	if !late.OK() || !late.Time().After(last) {
		t.Errorf("a caller arriving after the failover is admitted at %v, before the held turns end at %v: it took their units", late.Time(), last)
	}
	if err := holds[0].Cancel(ctx); err != nil {
		t.Fatalf("a waiter gives up after the failover: %v", err)
	}
	if n, err := countedOn(ctx, node, l, "w", window); err != nil || n != 19 {
		t.Errorf("after a hold of 2 is given back, the new master counts %d units (%v), want 19", n, err)
	}
}
