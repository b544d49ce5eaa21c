package tollgate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// What reading an upstream's announcements costs in Redis round trips:
// none when the announcement agrees with tollgate's count, one when it
// does not.

// roundTrips counts a go-redis client's round trips: a command, or a
// pipeline of them; not those that set a connection up (HELLO, CLIENT
// SETINFO), nor the write of bucket descriptions for the operators'
// tools, made once per process and scope bucket off the requests' path
// (on a connection of its own when a request holds the other), whenever
// they land.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !aside([]redis.Cmder{cmd}) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !aside(cmds) {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// aside reports commands that are not a request's: a connection's setup,
// or descriptions written.
func aside(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		args := c.Args()
		switch {
		case c.Name() == "hello" || c.Name() == "client":
		case c.Name() == "set" && len(args) > 1 && strings.HasSuffix(fmt.Sprint(args[1]), ":about"):
		default:
			return false
		}
	}
	return len(cmds) > 0
}

// countingUpstream answers in memory, announcing in GitHub's headers a
// quota of which it counts every request, and outside units more per
// request when others spend beside tollgate.
type countingUpstream struct {
	outside int64
	reset   time.Time

	mu   sync.Mutex
	used int64
}

func (u *countingUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	u.used += 1 + u.outside
	used := u.used
	u.mu.Unlock()
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}
	announceIn(resp.Header, "github", 1<<40, used, u.reset, 0, time.Now())
	return resp, nil
}

// reconcileRig is a Transport whose bucket follows the announcements of a
// countingUpstream (or, announced false, ignores them), on real Redis,
// with its round trips counted.
func reconcileRig(tb testing.TB, announced bool, outside int64) (*http.Client, *roundTrips) {
	s := redistest.Start(tb)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { rdb.Close() })
	var trips roundTrips
	rdb.AddHook(&trips)
	lim, err := quota.New(rdb)
	if err != nil {
		tb.Fatal(err)
	}
	table, _ := costs.New(costs.Spec{Buckets: []string{"core"},
		Rules: []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "core", Units: 1}}}}})
	bucket := tollgate.Bucket{Limits: []quota.Limit{quota.PerFixedWindow(1<<40, time.Hour, time.Time{})}}
	if announced {
		bucket.Follows = "github/core"
	}
	tr, err := tollgate.New(tollgate.Config{
		Base:    &countingUpstream{outside: outside, reset: time.Now().Add(time.Hour).Truncate(time.Second)},
		Limiter: lim, Costs: table, Scope: tollgate.Scope("token"),
		Buckets: map[string]tollgate.Bucket{"core": bucket},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr}, &trips
}

// spend sends one request through client and reads its response.
func spend(tb testing.TB, client *http.Client) {
	resp, err := client.Get("http://upstream.test/")
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestReconcileRoundTrips: a request whose response's announcement agrees
// with tollgate's count costs the round trips of one that is not read at
// all; one that shows units spent elsewhere costs one more.
func TestReconcileRoundTrips(t *testing.T) {
	perRequest := func(announced bool, outside int64) float64 {
		client, trips := reconcileRig(t, announced, outside)
		for range 3 { // learn the window, load the scripts
			spend(t, client)
		}
		const n = 50
		before := trips.n.Load()
		for range n {
			spend(t, client)
		}
		return float64(trips.n.Load()-before) / n
	}
	plain, agrees, disagrees := perRequest(false, 0), perRequest(true, 0), perRequest(true, 1)
	t.Logf("round trips per request: not read %.2f, agreeing %.2f, showing others' spending %.2f", plain, agrees, disagrees)
	if agrees != plain {
		t.Errorf("an agreeing announcement costs %.2f round trips a request, want the %.2f of none read", agrees, plain)
	}
	if disagrees > plain+1 {
		t.Errorf("an announcement of others' spending costs %.2f round trips a request, want at most %.2f", disagrees, plain+1)
	}
	if disagrees == plain {
		t.Errorf("an announcement of others' spending cost no round trip: it was not recorded")
	}
}

// BenchmarkReconcile measures a request whose response is not read for
// announcements (plain), one whose announcement agrees with tollgate's
// count, and one that shows units spent elsewhere, with the round trips
// each costs.
func BenchmarkReconcile(b *testing.B) {
	for _, c := range []struct {
		name      string
		announced bool
		outside   int64
	}{{"plain", false, 0}, {"agrees", true, 0}, {"disagrees", true, 1}} {
		b.Run(c.name, func(b *testing.B) {
			client, trips := reconcileRig(b, c.announced, c.outside)
			for range 3 {
				spend(b, client)
			}
			before := trips.n.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				spend(b, client)
			}
			b.ReportMetric(float64(trips.n.Load()-before)/float64(b.N), "round-trips/op")
		})
	}
}
