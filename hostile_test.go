package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// hostileNames are scope names a ScopeFunc might pass on from users.
var hostileNames = []string{
	"a{b", "a{c", "}{", "{x}", "with space", "line\nbreak", "\xff\xfe not utf-8", "",
	strings.Repeat("k", 10<<10), strings.Repeat("k", 10<<10) + "!", "tollgate:{x}:pool", "#",
}

type scopeKey struct{}

// TestHostileScopesOnACluster: scope names with braces, separators, white
// space, 10 KB or invalid UTF-8 keep every decision on one slot of a real
// cluster, never reach another scope's keys, and never panic.
func TestHostileScopesOnACluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	up := newUpstream(t)
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, c.Client(t)), Costs: table(t), Buckets: buckets(1, time.Hour),
		Scope: func(r *http.Request) (string, error) {
			name, _ := r.Context().Value(scopeKey{}).(string)
			return name, nil
		},
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	do := func(name string) error {
		ctx := context.WithValue(context.Background(), scopeKey{}, name)
		req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/v1/items", nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	for _, name := range hostileNames {
		err := do(name)
		if name == "" {
			if err == nil {
				t.Error("an empty scope was accepted")
			}
			continue
		}
		if err != nil {
			t.Errorf("scope %.20q: first call: %v (another scope's spending leaked in, or the keys broke)", name, err)
		}
	}
	for _, name := range hostileNames[:len(hostileNames)-1] {
		if name == "" {
			continue
		}
		if err := do(name); !errors.Is(err, tollgate.ErrQuotaExhausted) {
			t.Errorf("scope %.20q: second call under a limit of 1: %v, want a *QuotaError", name, err)
		}
	}
}

// TestBadComputedCostsReserveNothing: a rule whose Func computes a cost of
// 0, a negative one, one above every limit or near int64 overflow fails
// the request with a clear error and leaves nothing in Redis.
func TestBadComputedCostsReserveNothing(t *testing.T) {
	_, rc := realRedis(t)
	up := newUpstream(t)
	for _, units := range []int64{0, -1, 101, 1 << 62} {
		table, err := costs.New(costs.Spec{Buckets: []string{"pool"}, Rules: []costs.Rule{{
			Pattern: "GET /v1/items", Endpoint: "items.list",
			Func: func(*http.Request) (costs.Endpoint, error) {
				return costs.Endpoint{Charges: []costs.Charge{{Bucket: "pool", Units: units}}}, nil
			},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		tr := newTransport(t, tollgate.Config{
			Limiter: limiterOn(t, rc), Costs: table,
			Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}},
		})
		_, err = get(t, tr, up.URL+"/v1/items")
		switch {
		case units > 100 && units < quota.MaxUnits:
			if !errors.Is(err, quota.ErrCostExceedsLimit) {
				t.Errorf("cost %d: %v, want quota.ErrCostExceedsLimit", units, err)
			}
		case !errors.Is(err, costs.ErrInvalid):
			t.Errorf("cost %d: %v, want costs.ErrInvalid", units, err)
		}
	}
	if n, err := rc.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("%d keys in Redis after refused costs (%v), want none", n, err)
	}
	if up.count() != 0 {
		t.Errorf("the upstream received %d requests", up.count())
	}
}
