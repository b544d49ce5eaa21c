package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// answered is a Base that answers at once without a network, so that a
// RoundTrip measures the Transport's decision alone.
type answered struct{}

func (answered) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

// BenchmarkHotScope compares decisions on one hot scope through a
// Transport, call by call and from leases, with the PING round trip that
// bounds anything asking Redis on every call.
func BenchmarkHotScope(b *testing.B) {
	rdb := server(b)
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules:   []costs.Rule{{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	hot := func(lease func(scope, bucket string) (int64, time.Duration)) *tollgate.Transport {
		return transport(b, tollgate.Config{
			Base: answered{}, Limiter: limiter(b, rdb), Costs: table,
			Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{never(time.Second)}}},
			Scope:   tollgate.Scope("hot"), Lease: lease,
		})
	}
	trip := func(tr http.RoundTripper) func(ctx context.Context, _ int) error {
		return func(ctx context.Context, _ int) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/v1/items", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
	}
	b.Run("ping", func(b *testing.B) {
		parallel(b, rdb, "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() })
	})
	b.Run("call-by-call", func(b *testing.B) {
		parallel(b, rdb, "evalsha", trip(hot(nil)))
	})
	b.Run("lease", func(b *testing.B) {
		lease := func(string, string) (int64, time.Duration) { return 1000, time.Second }
		parallel(b, rdb, "evalsha", trip(hot(lease)))
	})
}
