package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// The command's tests run it against a redis-server shared with running
// Transports: what they spend, lease, hold and pause is what it shows.

// env is a redis-server, its URL, and an upstream that counts requests.
type env struct {
	url      string
	server   *redistest.Server
	upstream *httptest.Server
	arrived  atomic.Int64
}

// keepsEverything are the settings of a Redis that tollgate status does not
// warn of (docs/processes.md, What the Redis needs).
var keepsEverything = []string{"--appendonly", "yes", "--maxmemory-policy", "noeviction"}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := upstreamOnly(t)
	e.server = redistest.Start(t, keepsEverything...)
	e.url = "redis://" + e.server.Addr
	return e
}

// upstreamOnly is an env with the upstream alone, for a Redis of the
// test's own.
func upstreamOnly(t *testing.T) *env {
	e := &env{}
	e.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.arrived.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(e.upstream.Close)
	return e
}

// limiter is a process's limiter on the env's Redis, on clock when set.
func (e *env) limiter(t *testing.T, clock func() time.Time) *quota.Limiter {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: e.server.Addr})
	t.Cleanup(func() { c.Close() })
	var opts []quota.Option
	if clock != nil {
		opts = append(opts, quota.WithClock(clock))
	}
	lim, err := quota.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// pacific is the zone of the tests' calendar days.
func pacific(t *testing.T) *time.Location {
	t.Helper()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	return la
}

// process is a Transport as a program runs it: its scope in the
// X-Project header, a list call costing 1 pool unit, a search costing
// 100 pool units and 1 search unit, with the pool's upstream quota
// 10,000 a Pacific day and 420 per 100 seconds, 5% kept in reserve, and
// at most 4 searches in flight.
func (e *env) process(t *testing.T, lim *quota.Limiter, change func(*tollgate.Config)) *tollgate.Transport {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool", "search"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			{Pattern: "GET /v1/search", Endpoint: "search.list", Charges: []costs.Charge{{Bucket: "pool", Units: 100}, {Bucket: "search", Units: 1}}},
		},
		// The API's every endpoint, as a provider's table lists them: a
		// process whose pool is smaller than a search never calls it.
		Catalog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	la := pacific(t)
	cfg := tollgate.Config{
		Limiter: lim, Costs: tab, Transit: -1,
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerDay(10000, la), quota.PerWindow(420, 100*time.Second)}, ReservePercent: 5},
			"search": {Limits: []quota.Limit{quota.PerDay(100, la)}, MaxInFlight: 4},
		},
		Scope: func(r *http.Request) (string, error) { return r.Header.Get("X-Project"), nil },
	}
	if change != nil {
		change(&cfg)
	}
	tr, err := tollgate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// get sends one request through tr for project; the caller closes the
// response's body (its slot, if it holds one, is held until then).
func (e *env) get(tr *tollgate.Transport, project, path string) (*http.Response, error) {
	req, err := http.NewRequest("GET", e.upstream.URL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Project", project)
	return (&http.Client{Transport: tr}).Do(req)
}

// spend sends n requests to path and reads them to their end.
func (e *env) spend(t *testing.T, tr *tollgate.Transport, project, path string, n int) {
	t.Helper()
	for range n {
		resp, err := e.get(tr, project, path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// described waits, a few seconds at most, until the processes have left
// the descriptions of bucket in each of scopes in Redis (they write them
// off the request's path).
func described(t *testing.T, lim *quota.Limiter, bucket string, scopes ...string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range scopes {
		for i := 0; ; i++ {
			_, ok, err := ops.New(lim).Description(ctx, s, bucket)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if i == 500 {
				t.Fatalf("no description of bucket %s of scope %s after 5s", bucket, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// cmd runs the command in this process, on clock when set, and returns
// its exit status, stdout and stderr.
func cmd(t *testing.T, clock func() time.Time, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	c := &cli{stdout: &out, stderr: &errs, getenv: func(string) string { return "" }, clock: clock}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := c.run(ctx, args)
	return code, out.String(), errs.String()
}
