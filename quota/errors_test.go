package quota

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testInvalidWritesNothing checks that a cost that can never fit is refused
// at once with a *CostError, and that bad input leaves no key behind.
func testInvalidWritesNothing(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	small := PerWindow(10, time.Minute)
	big := PerWindow(1000, time.Minute)

	_, err := l.Wait(ctx, s, charge("b", 11, big, small))
	var ce *CostError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCostExceedsLimit) {
		t.Fatalf("cost 11 under a limit of 10: err = %v, want a *CostError", err)
	}
	if ce.Units != 11 || ce.Limit != small || ce.Bucket != "b" {
		t.Errorf("CostError = %+v, want 11 units, limit %v, bucket b", ce, small)
	}
	// A valid charge beside an invalid one is not recorded either.
	if _, err := l.Allow(ctx, s, charge("ok", 1, big), charge("b", 0, big)); !errors.Is(err, ErrInvalid) {
		t.Errorf("cost 0: err = %v, want ErrInvalid", err)
	}
	for _, k := range []struct {
		bucket string
		lim    Limit
	}{{"b", small}, {"b", big}, {"ok", big}} {
		log, meta := keysOf(l, s, k.bucket, k.lim)
		if n, err := b.client.Exists(ctx, log, meta).Result(); err != nil || n != 0 {
			t.Errorf("%s %v: %d keys exist after refused input (err %v), want 0", k.bucket, k.lim, n, err)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	l := mustNew(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})) // never reached
	minute := PerWindow(10, time.Minute)
	cases := []struct {
		name    string
		scope   string
		charges []Demand
	}{
		{"no charges", "s", nil},
		{"empty scope", "", []Demand{charge("b", 1, minute)}},
		{"zero units", "s", []Demand{charge("b", 1, PerWindow(0, time.Minute))}},
		{"negative units", "s", []Demand{charge("b", 1, PerWindow(-5, time.Minute))}},
		{"units past MaxUnits", "s", []Demand{charge("b", 1, PerWindow(MaxUnits+1, time.Minute))}},
		{"zero window", "s", []Demand{charge("b", 1, PerWindow(10, 0))}},
		{"negative window", "s", []Demand{charge("b", 1, PerWindow(10, -time.Second))}},
		{"sub-microsecond window", "s", []Demand{charge("b", 1, PerWindow(10, time.Nanosecond))}},
		{"calendar without location", "s", []Demand{charge("b", 1, PerDay(10, nil))}},
		{"calendar with a window", "s", []Demand{charge("b", 1, Limit{Units: 10, Calendar: true, Window: time.Hour, Location: time.UTC})}},
		{"zero limit", "s", []Demand{charge("b", 1, Limit{})}},
		{"no limits", "s", []Demand{charge("b", 1)}},
		{"zero cost", "s", []Demand{charge("b", 0, minute)}},
		{"negative cost", "s", []Demand{charge("b", -1, minute)}},
		{"cost near int64 overflow", "s", []Demand{charge("b", 1<<62, minute)}},
		{"one window twice", "s", []Demand{charge("b", 1, minute, PerWindow(99, time.Minute))}},
		{"one bucket window in two charges", "s", []Demand{charge("b", 1, minute), charge("b", 2, minute)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Allow(ctx, c.scope, c.charges...)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Allow = %v, want an error matching ErrInvalid", err)
			}
			if errors.Is(err, ErrRedis) {
				t.Errorf("Allow = %v: bad input must be caught before Redis", err)
			}
		})
	}
	if _, err := l.Usage(ctx, "s", "b", PerWindow(0, time.Second)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Usage with a bad limit = %v, want ErrInvalid", err)
	}
	if err := l.Pause(ctx, "s", "b", -time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("Pause with a negative duration = %v, want ErrInvalid", err)
	}
}

// TestRedisDown checks that a Redis failure is an error callers can tell
// from a refusal.
func TestRedisDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	l := mustNew(t, c)
	ctx := context.Background()
	ch := charge("b", 1, PerWindow(10, time.Minute))
	checks := map[string]error{}
	_, checks["Allow"] = l.Allow(ctx, "s", ch)
	_, checks["Wait"] = l.Wait(ctx, "s", ch)
	_, checks["Usage"] = l.Usage(ctx, "s", "b", ch.Limits[0])
	checks["Pause"] = l.Pause(ctx, "s", "b", time.Second)
	for name, err := range checks {
		var re *RedisError
		if !errors.Is(err, ErrRedis) || !errors.As(err, &re) {
			t.Errorf("%s = %v, want a *RedisError", name, err)
			continue
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Errorf("%s = %v: want the dial error inside", name, err)
		}
		if errors.Is(err, ErrRefused) || errors.Is(err, ErrInvalid) {
			t.Errorf("%s = %v: a Redis failure must not look like a refusal or bad input", name, err)
		}
	}
}

// TestNewRefusesWhatItCannotUse: a nil client, typed or not, and options
// it cannot use are errors at construction, never a panic on first use.
func TestNewRefusesWhatItCannotUse(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never reached
	defer good.Close()
	var nilClient *redis.Client
	var nilCluster *redis.ClusterClient
	cases := []struct {
		name   string
		client redis.UniversalClient
		opts   []Option
	}{
		{"nil client", nil, nil},
		{"typed nil *redis.Client", nilClient, nil},
		{"typed nil *redis.ClusterClient", nilCluster, nil},
		{"prefix with a brace", good, []Option{WithPrefix("app{1}:")}},
		{"nil clock", good, []Option{WithClock(nil)}},
		{"negative pipelines", good, []Option{WithPipelines(-1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := New(c.client, c.opts...)
			if !errors.Is(err, ErrInvalid) || l != nil {
				t.Errorf("New = %v, %v; want nil and an error matching ErrInvalid", l, err)
			}
		})
	}
	if _, err := New(good, WithPrefix("app:"), WithPipelines(0), nil); err != nil {
		t.Errorf("New with good options = %v", err)
	}
}

// A refusal's message rounds its wait up to what a person reads; the
// field keeps it exact.
func TestRefusedErrorRoundsItsWait(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "retry after 0s"},
		{1500 * time.Microsecond, "retry after 2ms"},
		{41234 * time.Millisecond, "retry after 41.3s"},
		{24*time.Hour + 49813*time.Microsecond, "retry after 24h0m1s"},
		{time.Hour, "retry after 1h0m0s"},
	} {
		e := &RefusedError{Scope: "s", RetryAfter: c.d}
		if got := e.Error(); !strings.HasSuffix(got, c.want) {
			t.Errorf("RefusedError{RetryAfter: %v}.Error() = %q, want it to end %q", c.d, got, c.want)
		}
	}
}
