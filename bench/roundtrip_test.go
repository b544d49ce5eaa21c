package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkRoundTrip sends the same request to an httptest.Server through a
// bare http.Transport and through a tollgate.Transport on a real
// redis-server, from 50 goroutines, beside one decision alone: the
// Transport's own overhead is its time less the bare trip and the decision.
func BenchmarkRoundTrip(b *testing.B) {
	rdb := server(b)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.Cleanup(api.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = callers
	b.Cleanup(base.CloseIdleConnections)
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules:   []costs.Rule{{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	lim := limiter(b, rdb)
	tr := transport(b, tollgate.Config{
		Base: base, Limiter: lim, Costs: table,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{never(time.Second)}}},
		Scope:   tollgate.Scope("hot"),
	})
	url := api.URL + "/v1/items"
	trip := func(rt http.RoundTripper) func(ctx context.Context, _ int) error {
		return func(ctx context.Context, _ int) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { parallel(b, nil, "", trip(base)) })
	b.Run("decision", func(b *testing.B) {
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Second + 50*time.Millisecond)}} // the window and the default Transit
		parallel(b, rdb, "evalsha", func(ctx context.Context, _ int) error {
			_, err := lim.Allow(ctx, "hot", c)
			return err
		})
	})
	b.Run("tollgate", func(b *testing.B) { parallel(b, rdb, "evalsha", trip(tr)) })
}
