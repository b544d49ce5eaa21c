package tollgate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// commandCounter counts the commands a go-redis client sends, less those
// that set a connection up (HELLO, CLIENT): the Transport opens one in the
// background to listen for pauses (notices.go).
type commandCounter struct{ sent atomic.Int64 }

func (c *commandCounter) n() int { return int(c.sent.Load()) }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			c.sent.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestKnownExhaustedRefusesWithoutARoundTrip: once Redis refused a cost
// until an instant, requests of the Error policy costing as much are
// refused in the process until then, without asking Redis; cheaper ones
// still ask, and after the instant everything does.
func TestKnownExhaustedRefusesWithoutARoundTrip(t *testing.T) {
	_, rc := realRedis(t)
	var counter commandCounter
	rc.AddHook(&counter)
	// Redis and the Transport decide on one clock the test moves.
	clock := testclock.New(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	lim := limiterOn(t, rc, quota.WithClock(clock.Now))
	up := newUpstream(t)
	var d decisions
	window := time.Minute
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(150, window),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Decided: d.hook},
	})
	tollgate.SetClock(tr, clock.Now)
	fill(t, lim, tollgate.DefaultScope, 100, 150, window)
	clock.Add(time.Second)

	// search.list costs 100 of the pool: Redis refuses it.
	_, err := get(t, tr, up.URL+"/v1/search")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Bucket != "pool" {
		t.Fatalf("first search: %v, want refused for the pool", err)
	}
	if qe.RetryAfter != window-time.Second {
		t.Fatalf("first search: retry after %v, want %v", qe.RetryAfter, window-time.Second)
	}
	asked := counter.n()
	for range 20 {
		clock.Add(time.Second)
		if _, err := get(t, tr, up.URL+"/v1/search"); !errors.As(err, &qe) || qe.RetryAfter <= 0 {
			t.Fatalf("search while the pool is known spent: %v", err)
		}
	}
	if counter.n() != asked {
		t.Errorf("20 refusals known in advance sent %d commands to Redis, want none", counter.n()-asked)
	}
	evs := d.list()
	if last := evs[len(evs)-1]; !last.Cached || last.Admitted {
		t.Errorf("last decision %+v, want a cached refusal", last)
	}
	// A 1-unit call may fit now: it asks Redis.
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Errorf("1-unit call: %v", err)
	}
	if counter.n() == asked {
		t.Error("a cheaper call was refused from the cache")
	}
	// Just before the refusal's instant, the cache still refuses; after
	// it, the search asks again and fits.
	clock.Add(qe.RetryAfter - time.Millisecond)
	asked = counter.n()
	if _, err := get(t, tr, up.URL+"/v1/search"); !errors.Is(err, tollgate.ErrQuotaExhausted) || counter.n() != asked {
		t.Errorf("search a millisecond before the known instant: %v, %d commands; want refused from the cache", err, counter.n()-asked)
	}
	clock.Add(2 * time.Millisecond)
	if _, err := get(t, tr, up.URL+"/v1/search"); err != nil {
		t.Errorf("search after the known instant: %v", err)
	}
}
