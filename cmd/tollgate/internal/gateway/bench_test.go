//go:build unix

package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/gateway"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// gatewayCallers is how many callers send requests at once.
const gatewayCallers = 50

// gatewayRun is what one sub-benchmark of BenchmarkGateway measured.
type gatewayRun struct {
	cpu      float64 // this process's CPU µs per request
	redisCPU float64 // Redis's main-thread CPU µs per request
	p50, p99 time.Duration
}

// BenchmarkGateway measures what tollgate serve costs in front of a local
// upstream, against httputil.ReverseProxy alone in front of the same
// upstream, in the same run, with 50 callers at once:
//
//   - direct: the callers and the upstream alone, no proxy (the floor
//     every other run's CPU includes);
//   - bare: httputil.ReverseProxy;
//   - decision: one quota decision alone (quota.Limiter.Allow on the
//     same redis-server), what the gateway pays per request for the
//     quota itself;
//   - gateway: the gateway (caller token, routing, a custom upstream's
//     Transport deciding in Redis, the proxy).
//
// Each reports this process's CPU per request (cpu-µs/req: callers,
// proxy and upstream together, all in this process; Redis's own CPU is
// another process's), Redis's main-thread CPU per request
// (redis-cpu-µs/req, INFO cpu) and the latency its callers saw at p50 and
// p99. The
// gateway's run also reports its proxy CPU beyond the decision against
// the bare proxy's (gateway-cpu/bare-cpu: (gateway - direct - decision) /
// (bare - direct)), and the latency it adds to the bare proxy's
// (added-p50-µs, added-p99-µs), and what its requests cost Redis against
// a decision alone (gateway-redis/decision-redis). Run it alone:
//
//	go test -run '^$' -bench Gateway -benchtime 20000x
func BenchmarkGateway(b *testing.B) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"youtube#videoListResponse","items":[{"id":"abc"}]}`)
	}))
	b.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)

	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() },
		Transport: gatewayBase(),
	})
	b.Cleanup(bare.Close)

	rs := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, PoolSize: gatewayCallers})
	b.Cleanup(func() { rdb.Close() })
	gw := startGateway(b, rdb, api.URL)

	client := &http.Client{Transport: gatewayBase()}
	send := func(base string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/items?part=id", nil)
			req.Header.Set("Authorization", "Bearer bench-caller-token")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	}
	lim, err := quota.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	charge := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, time.Second)}}

	runs := map[string]gatewayRun{}
	for _, mode := range []struct {
		name string
		op   func(context.Context) error
	}{
		{"direct", send(api.URL)},
		{"bare", send(bare.URL)},
		{"decision", func(ctx context.Context) error { _, err := lim.Allow(ctx, "bench-decision", charge); return err }},
		{"gateway", send(gw + "/api")},
	} {
		b.Run(mode.name, func(b *testing.B) {
			r := gatewayLoad(b, rdb, mode.op)
			runs[mode.name] = r
			b.ReportMetric(r.cpu, "cpu-µs/req")
			b.ReportMetric(r.redisCPU, "redis-cpu-µs/req")
			b.ReportMetric(float64(r.p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(r.p99.Microseconds()), "p99-µs")
			if mode.name != "gateway" {
				return
			}
			d, okD := runs["direct"]
			br, okB := runs["bare"]
			dec, okDec := runs["decision"]
			if okD && okB && okDec && br.cpu > d.cpu {
				b.ReportMetric((r.cpu-d.cpu-dec.cpu)/(br.cpu-d.cpu), "gateway-cpu/bare-cpu")
			}
			if okDec && dec.redisCPU > 0 {
				b.ReportMetric(r.redisCPU/dec.redisCPU, "gateway-redis/decision-redis")
			}
			if okB {
				b.ReportMetric(float64((r.p50 - br.p50).Microseconds()), "added-p50-µs")
				b.ReportMetric(float64((r.p99 - br.p99).Microseconds()), "added-p99-µs")
			}
		})
	}
}

// gatewayBase is a client transport keeping a connection per caller.
func gatewayBase() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = gatewayCallers
	return t
}

// startGateway serves a gateway with one custom upstream at /api/ on
// loopback, whose bucket never runs out, and returns its URL.
func startGateway(b *testing.B, rdb redis.UniversalClient, target string) string {
	dir := b.TempDir()
	costsFile := filepath.Join(dir, "costs.json")
	if err := os.WriteFile(costsFile, []byte(`{"buckets": ["pool"], "rules": [],
	  "default": {"endpoint": "any", "charges": [{"bucket": "pool", "units": 1}]}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	config := fmt.Sprintf(`{"callers": [{"name": "bench", "token_env": "BENCH_TOKEN"}],
	  "limits": {"max_in_flight": 1000},
	  "upstreams": [{"name": "api", "provider": "custom", "prefix": "/api/", "target": %q, "key_env": "BENCH_KEY",
	    "costs": %q, "buckets": {"pool": {"limits": [{"units": %d, "window": "1s"}]}}}]}`, target, costsFile, int64(quota.MaxUnits))
	env := map[string]string{"BENCH_TOKEN": "bench-caller-token", "BENCH_KEY": "bench-upstream-key"}
	cfg, err := gateway.Load([]byte(config), dir, func(k string) string { return env[k] })
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.Build(cfg, gateway.Options{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		<-done
		g.Close()
	})
	return "http://" + ln.Addr().String()
}

// gatewayLoad runs op b.N times from gatewayCallers goroutines, and
// measures this process's CPU and rdb's server's per op, and the latency
// percentiles.
func gatewayLoad(b *testing.B, rdb *redis.Client, op func(context.Context) error) gatewayRun {
	ctx := context.Background()
	// Warm the connections up, outside the measure.
	var warm sync.WaitGroup
	for range gatewayCallers {
		warm.Go(func() { op(ctx) })
	}
	warm.Wait()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	cpu, redisCPU := processCPU(), redistest.MainThreadCPU(b, rdb)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range gatewayCallers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				start := time.Now()
				if err := op(ctx); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	used, redisUsed := processCPU()-cpu, redistest.MainThreadCPU(b, rdb)-redisCPU
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	slices.Sort(lat)
	return gatewayRun{
		cpu:      float64(used.Microseconds()) / float64(b.N),
		redisCPU: redisUsed / float64(b.N),
		p50:      lat[len(lat)/2],
		p99:      lat[min(len(lat)-1, len(lat)*99/100)],
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
