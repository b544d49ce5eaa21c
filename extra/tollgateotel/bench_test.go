package tollgateotel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/extra/tollgateotel"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// What the instrumentation adds to RoundTrip: the same requests through an
// uninstrumented Transport, one instrumented on a no-op meter provider,
// and one on the SDK's, in the same run. The base transport answers at
// once, without a network, so that nothing but tollgate and the metrics
// is measured.

// canned answers every request at once.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// variant is one way of building the Transport: its meter provider, nil
// for none (uninstrumented).
type variant struct {
	name string
	mp   func() metric.MeterProvider
}

var variants = []variant{
	{"bare", nil},
	{"noop", func() metric.MeterProvider { return noop.NewMeterProvider() }},
	{"sdk", func() metric.MeterProvider {
		return sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	}},
}

// build makes a Transport of cfg, instrumented as v says, with canned as
// its base.
func (v variant) build(tb testing.TB, cfg tollgate.Config) *tollgate.Transport {
	tb.Helper()
	cfg.Base, cfg.Costs = canned{}, testTable(tb)
	var m *tollgateotel.Metrics
	if v.mp != nil {
		var err error
		if m, err = tollgateotel.New(tollgateotel.WithMeterProvider(v.mp())); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { m.Close() })
		cfg = m.Instrument(cfg)
	}
	tr, err := tollgate.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	if m != nil {
		m.Observe(tr)
	}
	return tr
}

// leased is a Transport whose requests spend from a lease far larger than
// the run: its decision takes no round trip, so that the instrumentation's
// share of a request is as large as it can be.
func leased(tb testing.TB, lim *quota.Limiter) tollgate.Config {
	return tollgate.Config{
		Limiter: lim,
		Buckets: map[string]tollgate.Bucket{
			"tokens": {Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, time.Hour)}},
			"pool":   {Limits: []quota.Limit{quota.PerWindow(1, time.Hour)}},
			"search": {Limits: []quota.Limit{quota.PerWindow(1, time.Hour)}},
		},
		Lease: func(string, string) (int64, time.Duration) { return quota.MaxUnits / 2, time.Hour },
	}
}

// roundTrip sends one stats call (10 tokens) through rt.
func roundTrip(tb testing.TB, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
}

// BenchmarkLeasedRoundTrip: one goroutine, decisions from a lease. The
// three Transports take turns, a chunk of requests each, so that the load
// of a shared machine falls on all of them alike; each one's CPU time per
// request is reported (its thread's, on Linux), and what the
// instrumentation added to it.
func BenchmarkLeasedRoundTrip(b *testing.B) {
	const chunk = 128
	trs := make([]*tollgate.Transport, len(variants))
	req, _ := http.NewRequest("GET", "http://api.test/v1/stats", nil)
	for i, v := range variants {
		trs[i] = v.build(b, leased(b, inProcess(b)))
		roundTrip(b, trs[i], req) // takes the lease, fills the caches
	}
	spent := make([]time.Duration, len(trs))
	calls := make([]int, len(trs))
	clock, done := threadClock()
	defer done()
	b.ReportAllocs()
	k, start := 0, clock()
	for b.Loop() {
		v := (k / chunk) % len(trs)
		roundTrip(b, trs[v], req)
		if k++; k%chunk == 0 {
			now := clock()
			spent[v] += now - start
			calls[v] += chunk
			start = now
		}
	}
	if calls[len(trs)-1] == 0 {
		return // too few rounds to compare
	}
	perCall := func(v int) float64 { return float64(spent[v].Nanoseconds()) / float64(calls[v]) }
	for v := range trs {
		b.ReportMetric(perCall(v), variants[v].name+"-cpu-ns/req")
	}
	for v := 1; v < len(trs); v++ {
		b.ReportMetric(perCall(v)-perCall(0), variants[v].name+"-added-cpu-ns/req")
	}
}

// BenchmarkHooks: the instrumentation's own work for a request: the
// decision hook of an admitted request charged to one bucket, the only
// hook a leased request calls. Its thread's CPU time per call is reported
// beside ns/op, which a loaded machine inflates.
func BenchmarkHooks(b *testing.B) {
	d := tollgate.Decision{Endpoint: "stats", Scope: "default", Charges: []costs.Charge{{Bucket: "tokens", Units: 10}}, Admitted: true}
	for _, v := range variants[1:] {
		b.Run(v.name, func(b *testing.B) {
			m, err := tollgateotel.New(tollgateotel.WithMeterProvider(v.mp()))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			hook := m.Instrument(tollgate.Config{}).Trace.Decided
			ctx := context.Background()
			hook(ctx, d)
			clock, done := threadClock()
			defer done()
			b.ReportAllocs()
			calls, start := 0, clock()
			for b.Loop() {
				hook(ctx, d)
				calls++
			}
			b.ReportMetric(float64((clock()-start).Nanoseconds())/float64(calls), "cpu-ns/call")
		})
	}
}

// BenchmarkRedisRoundTrip: 50 goroutines, each decision a script on a real
// redis-server, as in bench/'s BenchmarkRoundTrip.
func BenchmarkRedisRoundTrip(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	lim, err := quota.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			cfg := leased(b, lim)
			cfg.Lease, cfg.Scope = nil, tollgate.Scope(v.name)
			tr := v.build(b, cfg)
			req, _ := http.NewRequest("GET", "http://api.test/v1/stats", nil)
			roundTrip(b, tr, req)
			b.ReportAllocs()
			b.SetParallelism(25) // 50 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := req.Clone(context.Background())
				for pb.Next() {
					roundTrip(b, tr, req)
				}
			})
		})
	}
}

// TestNoAllocationPerRequest: an instrumented RoundTrip allocates what an
// uninstrumented one does, on either meter provider.
func TestNoAllocationPerRequest(t *testing.T) {
	allocs := map[string]float64{}
	for _, v := range variants {
		tr := v.build(t, leased(t, inProcess(t)))
		req, _ := http.NewRequest("GET", "http://api.test/v1/stats", nil)
		roundTrip(t, tr, req)
		allocs[v.name] = testing.AllocsPerRun(500, func() { roundTrip(t, tr, req) })
	}
	for _, v := range variants[1:] {
		if allocs[v.name] > allocs["bare"] {
			t.Errorf("a RoundTrip instrumented on %s allocates %v times, uninstrumented %v", v.name, allocs[v.name], allocs["bare"])
		}
	}
	t.Logf("allocations per RoundTrip: %v", allocs)
}
