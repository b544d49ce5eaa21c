package tollgateotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/extra/tollgateotel"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// rig is a Transport instrumented on an SDK meter provider read by hand,
// sending to a test upstream.
type rig struct {
	tr      *tollgate.Transport
	metrics *tollgateotel.Metrics
	reader  *sdkmetric.ManualReader
	up      *httptest.Server
	respond func(w http.ResponseWriter, r *http.Request) // nil: 200 "ok"
	mu      sync.Mutex
}

// newRig instruments cfg (whose Limiter, when nil, is an in-process one),
// builds its Transport and observes it.
func newRig(t *testing.T, cfg tollgate.Config, opts ...tollgateotel.Option) *rig {
	t.Helper()
	r := &rig{reader: sdkmetric.NewManualReader()}
	r.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		respond := r.respond
		r.mu.Unlock()
		if respond != nil {
			respond(w, req)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(r.up.Close)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := tollgateotel.New(append([]tollgateotel.Option{tollgateotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	r.metrics = m
	if cfg.Limiter == nil {
		cfg.Limiter = inProcess(t)
	}
	if cfg.Costs == nil {
		cfg.Costs = testTable(t)
	}
	r.tr, err = tollgate.New(m.Instrument(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tr.Close() })
	m.Observe(r.tr)
	return r
}

func (r *rig) setRespond(f func(w http.ResponseWriter, req *http.Request)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.respond = f
}

// get sends a GET of path, reads and closes the body, and returns the error.
func (r *rig) get(t *testing.T, ctx context.Context, path string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", r.up.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

// points collects the metrics: each data point's value under its name and
// attributes, e.g. "tollgate.rate_limiting.requests{tollgate.endpoint=items.list,...}";
// a histogram gives its count, under its name with "_count".
func (r *rig) points(t *testing.T) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		return name + "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					out[key(m.Name+"_count", p.Attributes)] = float64(p.Count)
					out[key(m.Name+"_sum", p.Attributes)] = p.Sum
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// want checks the points named, and lists them all on a mismatch.
func want(t *testing.T, got map[string]float64, wanted map[string]float64) {
	t.Helper()
	bad := false
	for k, v := range wanted {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present: %v), want %v", k, g, ok, v)
			bad = true
		}
	}
	if bad {
		t.Logf("all points:\n%s", dump(got))
	}
}

// dump lists points one a line, in order.
func dump(points map[string]float64) string {
	keys := make([]string, 0, len(points))
	for k := range points {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %v\n", k, points[k])
	}
	return b.String()
}

// testTable charges items.list 1 pool unit, search.list 100 pool units and
// a search call, and a report 100 tokens settled from its X-Cost header;
// ping is free.
func testTable(t testing.TB) *costs.Table {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool", "search", "tokens"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			{Pattern: "GET /v1/search", Endpoint: "search.list", Charges: []costs.Charge{{Bucket: "pool", Units: 100}, {Bucket: "search", Units: 1}}},
			{Pattern: "GET /v1/report", Endpoint: "report", Charges: []costs.Charge{{Bucket: "tokens", Units: 1000}},
				Settle: []costs.Settle{{Bucket: "tokens", Header: "X-Cost"}}},
			{Pattern: "GET /v1/stats", Endpoint: "stats", Charges: []costs.Charge{{Bucket: "tokens", Units: 10}}},
			{Pattern: "GET /v1/ping", Endpoint: "ping", Free: true},
		},
		// The API's every endpoint, as a provider's table lists them: a
		// test whose pool is smaller than a search never calls it.
		Catalog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// testBuckets gives pool units per window, 10 search calls and 100,000
// tokens per hour.
func testBuckets(pool int64, window time.Duration) map[string]tollgate.Bucket {
	return map[string]tollgate.Bucket{
		"pool":   {Limits: []quota.Limit{quota.PerWindow(pool, window)}},
		"search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}},
		"tokens": {Limits: []quota.Limit{quota.PerWindow(100000, time.Hour)}},
	}
}

// inProcess returns a limiter on an in-process Redis.
func inProcess(t testing.TB) *quota.Limiter {
	t.Helper()
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	lim, err := quota.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}
