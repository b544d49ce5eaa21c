package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
)

// TestSlowRedis puts 100ms of latency each way between the Transport and
// Redis. A context deadline shorter than the round trip is still honoured
// within a few milliseconds; a MaxWait shorter than it is not a deadline
// (it bounds the wait for a turn, not the decision): a request with room
// is sent. A slow answer is not mistaken for Redis being down.
func TestSlowRedis(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr, 100*time.Millisecond)
	// ContextTimeoutEnabled lets a context deadline interrupt a command in flight.
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rc.Close()
	up := newUpstream(t)
	var switches int
	newTransport := func(p tollgate.Policy) *tollgate.Transport {
		return newTransport(t, tollgate.Config{
			Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(100, time.Minute),
			Policy:   tollgate.Policies(p, nil),
			OnSwitch: func(tollgate.Switch) { switches++ },
		})
	}
	const slack = 20 * time.Millisecond

	// A sound request through the slow link works, taking its round trip.
	start := time.Now()
	if _, err := get(t, newTransport(tollgate.Policy{}), up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 200*time.Millisecond {
		t.Fatalf("a request took %v: the proxy does not delay", rtt)
	}

	cases := []struct {
		name     string
		policy   tollgate.Policy
		deadline time.Duration // of the request's context; 0 for none
		bound    time.Duration // 0: the round trips it takes
		want     error
	}{
		{"deadline, error policy", tollgate.Policy{OnRefusal: tollgate.Refuse}, 50 * time.Millisecond, 50 * time.Millisecond, context.DeadlineExceeded},
		{"deadline, wait policy", tollgate.Policy{}, 50 * time.Millisecond, 50 * time.Millisecond, context.DeadlineExceeded},
		{"MaxWait with room", tollgate.Policy{MaxWait: 80 * time.Millisecond}, 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			start := time.Now()
			_, err := send(t, newTransport(c.policy), ctx, "GET", up.URL+"/v1/items", nil)
			took := time.Since(start)
			if !errors.Is(err, c.want) {
				t.Errorf("RoundTrip = %v, want %v", err, c.want)
			}
			if c.bound > 0 && took > c.bound+slack {
				t.Errorf("RoundTrip returned after %v, want within %v of its %v bound", took, slack, c.bound)
			}
		})
	}
	if switches != 0 {
		t.Errorf("a slow Redis was taken for a dead one %d times", switches)
	}
	if up.count() != 2 {
		t.Errorf("the upstream received %d requests, want the first and the one with a short MaxWait", up.count())
	}
}
