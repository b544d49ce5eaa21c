package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkSentinel measures what the replica's acknowledgement costs a
// decision on a Sentinel set (a master, one replica, three sentinels, all
// on loopback): with a Sentinel URL tollgate answers each decision once a
// replica holds it (quota.WithReplicas, the default on a failover client),
// "bare" is quota.WithReplicas(0, 0). Each runs alone and with 50 callers
// (decisions sharing a pipeline share its WAIT), over 64 scopes. Beside the
// median time of a decision it reports the master's and the replica's
// main-thread CPU per decision (INFO cpu): the acknowledgement is a WAIT
// on the master and the replication stream the replica applies, and the
// machine's load moves the times far more than it moves these.
func BenchmarkSentinel(b *testing.B) {
	set := redistest.StartSentinel(b, 1, redistest.Options{})
	rc := set.Client(b)
	master := redis.NewClient(&redis.Options{Addr: set.Master.Addr})
	replica := redis.NewClient(&redis.Options{Addr: set.Replicas[0].Addr})
	b.Cleanup(func() { master.Close(); replica.Close() })
	c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Minute)}}
	scopes := make([]string, 64)
	for i := range scopes {
		scopes[i] = "s" + strconv.Itoa(i)
	}
	kinds := []struct {
		name string
		lim  *quota.Limiter
	}{
		{"acknowledged", limiter(b, rc)},
		{"bare", limiter(b, rc, quota.WithReplicas(0, 0))},
	}
	for _, k := range kinds {
		for _, n := range []int{1, callers} {
			b.Run(k.name+"/callers="+strconv.Itoa(n), func(b *testing.B) {
				ctx := context.Background()
				var mu sync.Mutex
				var times []time.Duration
				// decide makes the i-th decision of one caller and keeps its time.
				decide := func(i int, into *[]time.Duration) bool {
					start := time.Now()
					if _, err := k.lim.Allow(ctx, scopes[i%len(scopes)], c); err != nil {
						b.Error(err)
						return false
					}
					*into = append(*into, time.Since(start))
					return true
				}
				masterCPU, replicaCPU := serverCPU(b, master), serverCPU(b, replica)
				b.ResetTimer()
				if n == 1 {
					for i := 0; b.Loop() && decide(i, &times); i++ {
					}
				} else {
					b.SetParallelism((n + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					b.RunParallel(func(pb *testing.PB) {
						var mine []time.Duration
						for i := 0; pb.Next() && decide(i, &mine); i++ {
						}
						mu.Lock()
						times = append(times, mine...)
						mu.Unlock()
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(median(times).Nanoseconds())/1e3, "µs/decision")
				b.ReportMetric((serverCPU(b, master)-masterCPU)/float64(b.N), "master-cpu-µs/op")
				b.ReportMetric((serverCPU(b, replica)-replicaCPU)/float64(b.N), "replica-cpu-µs/op")
			})
		}
	}
}
