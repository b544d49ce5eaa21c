package tollgate_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// TestCappedRequestRoundTrips: a request charging units and a capped
// bucket takes its units and its slot in one round trip, and, settled
// from its answer, frees the slot in the settlement's: two in all, where
// taking and freeing the slot apart cost two more; unsettled, one more to
// free the slot. It holds for a request refused at once (Refuse) and for
// one that would wait its turn (WaitTurn), and the slot is free after.
func TestCappedRequestRoundTrips(t *testing.T) {
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"core", "concurrent"},
		Rules: []costs.Rule{
			{Pattern: "POST /settled", Endpoint: "settled",
				Charges: []costs.Charge{{Bucket: "core", Units: 100}, {Bucket: "concurrent", Units: 1}},
				Settle:  []costs.Settle{{Bucket: "core", Field: "usage.units"}}},
			{Pattern: "GET /plain", Endpoint: "plain",
				Charges: []costs.Charge{{Bucket: "core", Units: 1}, {Bucket: "concurrent", Units: 1}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Start(t).Client(t)
	calls := &roundTrips{}
	rdb.AddHook(calls)
	lim := limiterOn(t, rdb)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"units":17}}`)
	})
	for _, action := range []tollgate.Action{tollgate.Refuse, tollgate.WaitTurn} {
		scope := "refuse"
		if action == tollgate.WaitTurn {
			scope = "wait"
		}
		tr := newTransport(t, tollgate.Config{
			Limiter: lim, Costs: tab, Scope: tollgate.Scope(scope),
			Buckets: map[string]tollgate.Bucket{
				"core":       {Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, time.Hour)}},
				"concurrent": {Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, time.Hour)}, MaxInFlight: 10},
			},
			Policy: tollgate.Policies(tollgate.Policy{OnRefusal: action, MaxWait: time.Minute}, nil),
		})
		for i := range 3 { // the first loads the scripts
			for _, ep := range []struct {
				method, path string
				want         int64
			}{{"POST", "/settled", 2}, {"GET", "/plain", 2}} {
				before := calls.n.Load()
				req, _ := http.NewRequest(ep.method, up.URL+ep.path, strings.NewReader("{}"))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := calls.n.Load() - before; i > 0 && got != ep.want {
					t.Errorf("%s %s (%v): %d round trips, want %d", ep.method, ep.path, action, got, ep.want)
				}
				if n := rdb.ZCard(context.Background(), "tollgate:{"+scope+"}:concurrent:slots").Val(); n != 0 {
					t.Fatalf("%s %s (%v): %d slots still held after the response ended", ep.method, ep.path, action, n)
				}
			}
		}
		u, err := tr.Usage(context.Background(), scope, "core")
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(3 * (17 + 1)); u[0].Used != want {
			t.Errorf("%v: core used %d, want %d: settled requests count 17, the others 1", action, u[0].Used, want)
		}
	}
}
