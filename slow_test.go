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

// TestSlowRedis puts 200ms of latency each way between the Transport and
// Redis. A context deadline shorter than the round trip is still honoured:
// the request returns on its deadline, before Redis's answer could come
// back; a MaxWait shorter than it is not a deadline (it bounds the wait for
// a turn, not the decision): a request with room is sent. A slow answer is
// not mistaken for Redis being down.
func TestSlowRedis(t *testing.T) {
	srv := redistest.Start(t)
	const delay = 200 * time.Millisecond
	proxy := redistest.NewProxy(t, srv.Addr, delay)
	// ContextTimeoutEnabled lets a context deadline interrupt a command in flight.
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rc.Close()
	up := newUpstream(t)
	var switches int
	newTransport := func(p tollgate.Policy) *tollgate.Transport {
		return newTransport(t, tollgate.Config{
			Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(100, time.Minute),
			Policy: tollgate.Policies(p, nil),
			Trace:  tollgate.Trace{Switched: func(context.Context, tollgate.Switch) { switches++ }},
		})
	}
	// No answer from Redis can come back sooner than a round trip through
	// the proxy, 2*delay after its command left. A request that returns on
	// its deadline returns before that; one that waited for the answer to
	// its command, after it. That is the bound on a deadline case: which
	// of the two the Transport waited for, not how promptly a loaded
	// machine runs the goroutine after the deadline (under -race, beside
	// other tests, that has taken 145ms: a fixed 20ms past the deadline
	// failed 1 run in 20 to 30).
	const answer = 2 * delay

	// A sound request through the slow link works, taking its round trip.
	start := time.Now()
	if _, err := get(t, newTransport(tollgate.Policy{}), up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < answer {
		t.Fatalf("a request took %v: the proxy does not delay", rtt)
	}

	cases := []struct {
		name     string
		policy   tollgate.Policy
		deadline time.Duration // of the request's context; 0 for none
		want     error
	}{
		{"deadline, error policy", tollgate.Policy{OnRefusal: tollgate.Refuse}, 50 * time.Millisecond, context.DeadlineExceeded},
		{"deadline, wait policy", tollgate.Policy{}, 50 * time.Millisecond, context.DeadlineExceeded},
		{"MaxWait with room", tollgate.Policy{MaxWait: 80 * time.Millisecond}, 0, nil},
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
			if c.deadline > 0 && took >= answer {
				t.Errorf("RoundTrip returned after %v, want before %v: on its %v deadline, not on Redis's answer", took, answer, c.deadline)
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
