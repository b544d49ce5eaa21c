package bench

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// BenchmarkCappedPaired measures Redis's CPU for a capped request (a
// GitHub request: units in a window and a slot of a cap of requests in
// flight, held until its response ends) against redis_rate's for one
// decision, as BenchmarkSettledPaired does. Cases: plain (a decision
// alone, the 1.0x it must keep); capped (units and slot in one script,
// ReserveCapped, then the slot freed, Release); capped/apart (the slot
// taken, then the units, then the slot freed: the three round trips a
// capped request cost before ReserveCapped); capped-settled (ReserveCapped,
// then the settlement frees the slot, SettleAndRelease); capped-settled/
// apart (TakeSlot, Allow, Settle, Release); settled (Allow, Settle: a
// settled request with no cap, for reference). Each case runs one round
// trip per call, and but the apart ones again under "pipelined", with the
// shared pipelines tollgate ships with.
func BenchmarkCappedPaired(b *testing.B) {
	window := []quota.Limit{never(time.Minute)}
	core := quota.Demand{Bucket: "core", Units: 100, Limits: window}
	caps := []quota.Cap{{Bucket: "concurrent", N: 100}}
	apart := func(ctx context.Context, lim *quota.Limiter, s string, settle bool) error {
		slot, err := lim.TakeSlot(ctx, s, "concurrent", 100, 0)
		if err != nil {
			return err
		}
		r, err := lim.Allow(ctx, s, core)
		if err != nil || !r.OK() {
			return refusedOr(err)
		}
		if settle {
			if err := r.Settle(ctx, "core", 17); err != nil {
				return err
			}
		}
		return slot.Release(ctx)
	}
	together := func(ctx context.Context, lim *quota.Limiter, s string, settle bool) error {
		r, slots, err := lim.ReserveCapped(ctx, s, 0, caps, core)
		if err != nil || !r.OK() {
			return refusedOr(err)
		}
		if settle {
			return r.SettleAndRelease(ctx, map[string]int64{"core": 17}, slots...)
		}
		return slots[0].Release(ctx)
	}
	for _, v := range []struct {
		name string
		op   func(ctx context.Context, lim *quota.Limiter, s string) error
	}{
		{"plain", func(ctx context.Context, lim *quota.Limiter, s string) error {
			r, err := lim.Allow(ctx, s, core)
			if err != nil || !r.OK() {
				return refusedOr(err)
			}
			return nil
		}},
		{"capped", func(ctx context.Context, lim *quota.Limiter, s string) error { return together(ctx, lim, s, false) }},
		{"capped/apart", func(ctx context.Context, lim *quota.Limiter, s string) error { return apart(ctx, lim, s, false) }},
		{"capped-settled", func(ctx context.Context, lim *quota.Limiter, s string) error { return together(ctx, lim, s, true) }},
		{"capped-settled/apart", func(ctx context.Context, lim *quota.Limiter, s string) error { return apart(ctx, lim, s, true) }},
		{"settled", func(ctx context.Context, lim *quota.Limiter, s string) error {
			r, err := lim.Allow(ctx, s, core)
			if err != nil || !r.OK() {
				return refusedOr(err)
			}
			return r.Settle(ctx, "core", 17)
		}},
	} {
		for _, pipelined := range []bool{false, true} {
			name := v.name
			if pipelined {
				if strings.HasSuffix(name, "/apart") {
					continue // the old way, measured call by call only
				}
				name = "pipelined/" + name
			}
			b.Run(name, func(b *testing.B) {
				pairedWithRedisRate(b, pipelined, func(lim *quota.Limiter, _ *redis.Client) func(ctx context.Context, s string) error {
					return func(ctx context.Context, s string) error { return v.op(ctx, lim, s) }
				})
			})
		}
	}
}

// BenchmarkCappedTransportPaired measures the same through a
// tollgate.Transport, against an upstream in memory, as
// BenchmarkCappedPaired does. Each request charges a window in two
// buckets, as GitHub's do (core, and concurrent, which is capped at 100
// in flight): plain (the second bucket not capped); capped; capped-settled
// (settled from its answer's body, the slot freed in the settlement's
// round trip).
func BenchmarkCappedTransportPaired(b *testing.B) {
	table, err := costs.New(costs.Spec{
		Buckets: []string{"core", "concurrent", "uncapped"},
		Rules: []costs.Rule{
			{Pattern: "GET /plain", Endpoint: "plain", Charges: []costs.Charge{{Bucket: "core", Units: 1}, {Bucket: "uncapped", Units: 1}}},
			{Pattern: "GET /capped", Endpoint: "capped", Charges: []costs.Charge{{Bucket: "core", Units: 1}, {Bucket: "concurrent", Units: 1}}},
			{Pattern: "GET /capped-settled", Endpoint: "capped-settled",
				Charges: []costs.Charge{{Bucket: "core", Units: 100}, {Bucket: "concurrent", Units: 1}},
				Settle:  []costs.Settle{{Bucket: "core", Field: "usage.units"}}},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/plain", "/capped", "/capped-settled"} {
		b.Run(path[1:], func(b *testing.B) {
			pairedWithRedisRate(b, false, func(lim *quota.Limiter, _ *redis.Client) func(ctx context.Context, s string) error {
				tr := transport(b, tollgate.Config{
					Base: answering(`{"usage":{"units":17}}`), Limiter: lim, Costs: table,
					Buckets: map[string]tollgate.Bucket{
						"core":       {Limits: []quota.Limit{never(time.Minute)}},
						"concurrent": {Limits: []quota.Limit{never(time.Minute)}, MaxInFlight: 100},
						"uncapped":   {Limits: []quota.Limit{never(time.Minute)}},
					},
					Scope: func(r *http.Request) (string, error) { return r.Header.Get("X-Scope"), nil },
				})
				return func(ctx context.Context, s string) error {
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test"+path, nil)
					req.Header.Set("X-Scope", s)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						return err
					}
					io.Copy(io.Discard, resp.Body)
					return resp.Body.Close()
				}
			})
		})
	}
}

// answering is an upstream in memory that answers every request 200 with
// body, as JSON.
type answering string

func (a answering) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(string(a))), ContentLength: int64(len(a)),
	}, nil
}

// pairedWithRedisRate runs a tollgate request in scope s (what request
// makes of a limiter with one round trip per call, or with the shared
// pipelines tollgate ships with when pipelined, and of the limiter's
// redis-server, for a request's round trips beside tollgate's) and a redis_rate
// decision in turn, from callers goroutines, each on a redis-server of its own, over
// 10,000 scopes warmed first, and reports each server's main-thread CPU
// per request and their ratio.
func pairedWithRedisRate(b *testing.B, pipelined bool, request func(lim *quota.Limiter, rdb *redis.Client) func(ctx context.Context, s string) error) {
	const n = 10_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	tg, rr := server(b), server(b)
	opts := []quota.Option{quota.WithPipelines(0)}
	if pipelined {
		opts = nil
	}
	send := request(limiter(b, tg, opts...), tg)
	peer := redis_rate.NewLimiter(rr)
	var next atomic.Int64
	pair := func(ctx context.Context, _ int) error {
		s := scopes[int(next.Add(1))%n]
		if err := send(ctx, s); err != nil {
			return err
		}
		_, err := peer.AllowN(ctx, s, limit, 1)
		return err
	}
	mine, theirs := pairedCPU(b, n, tg, rr, pair)
	b.ReportMetric(mine, "tollgate-cpu-µs/request")
	b.ReportMetric(theirs, "redis_rate-cpu-µs/op")
	b.ReportMetric(mine/theirs, "cpu-ratio")
}
