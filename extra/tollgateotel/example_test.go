package tollgateotel_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
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

func Example() {
	// Any MeterProvider: here the SDK's, read by hand; in a service, the
	// one its exporter (Prometheus, OTLP) reads.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	metrics, err := tollgateotel.New(tollgateotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()
	rdb, err := embedded.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules:   []costs.Rule{{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// Instrument merges the recording into the Config's Trace; Observe
	// gives the quota gauges the Transport to read.
	tr, err := tollgate.New(metrics.Instrument(tollgate.Config{
		Limiter: lim, Costs: table, Scope: tollgate.Scope("project-a"),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10000, 24*time.Hour)}, ReserveUnits: 500}},
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	metrics.Observe(tr)

	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(api.URL + "/v1/search")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			}
		}
	}
	// Output:
	// tollgate.rate_limiting.requests tollgate.endpoint=search,tollgate.rate_limiting.result=admitted 3
	// tollgate.rate_limiting.units.charged tollgate.bucket=pool,tollgate.endpoint=search 300
	// tollgate.redis.available  1
	// tollgate.quota.remaining tollgate.bucket=pool,tollgate.window=24h0m0.05s 9200
	// tollgate.quota.limit tollgate.bucket=pool,tollgate.window=24h0m0.05s 9500
}
