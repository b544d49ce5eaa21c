package tollgate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
)

// TestDistantWaiterIsDecidedOnce: a process 200 ms from its Redis (100 ms
// each way; its Transit 150 ms, so that a loaded machine has time to wake
// it) waits for its turn, not listening for
// pauses when it decided. It reads the pauses it may have missed while it
// waits, not after its turn, so that it reaches the upstream within
// Transit of its turn and is decided once: reading them after the turn
// took a round trip, made the request late, and had it given back and
// decided again (a second decision, reported twice, behind every hold
// taken meanwhile).
func TestDistantWaiterIsDecidedOnce(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr, 100*time.Millisecond)
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	defer rc.Close()
	up := newUpstream(t)
	var admitted atomic.Int64
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(2, 2*time.Second), Transit: 150 * time.Millisecond,
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			if d.Admitted {
				admitted.Add(1)
			}
		}},
	})
	for i := range 3 { // the third waits about two seconds for its turn
		resp, err := get(t, tr, up.URL+"/v1/items")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if n := admitted.Load(); n != 3 {
		t.Errorf("3 requests were admitted %d times: the one that waited was decided again", n)
	}
}
