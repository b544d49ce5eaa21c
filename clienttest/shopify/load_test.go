package shopify_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/shopsim"
)

// The load: three processes of four goroutines on one shop and token.
const procs, workers = 3, 4

// items is how many nodes a connection returns: fewer than a catalogue
// page's 50, so that the actual cost is below the requested one and is
// refunded. (Shopify takes the requested cost up front, so the more it
// refunds, the less of the bucket any client can spend: with 30, some
// 75% is the most.)
const items = 45

// run starts the simulated shop and the worker processes (through tollgate
// on one redis-server unless control), waits for them, and returns the
// shop, the workers' results and the run's length.
func run(t *testing.T, control bool, duration time.Duration) (*shopsim.Server, []workerResult, time.Duration) {
	t.Helper()
	sim := shopsim.New(shopsim.Config{Shop: shop, Items: items})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	var redisAddr string
	if !control {
		redisAddr = redistest.Start(t).Addr
	}
	start := time.Now().Add(2 * time.Second) // time for every process to boot
	var cfgs []any
	for p := range procs {
		cfgs = append(cfgs, childConfig{API: api.URL, Redis: redisAddr, Key: "shpat_load_token",
			Minute: time.Minute, Transit: 250 * time.Millisecond, Start: start, Duration: duration, Workers: workers, Process: p})
	}
	var all []workerResult
	for _, rs := range rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...)) {
		all = append(all, rs...)
	}
	return sim, all, duration
}

// TestManyProcesses: the load through tollgate, GraphQL and REST.
// Required: no THROTTLED answer and no REST 429, the bucket never below
// zero, and at least 70% of the points the bucket and its restore rate
// allowed over the run spent.
func TestManyProcesses(t *testing.T) {
	sim, results, duration := run(t, false, 10*time.Second)
	var queries, refused, cut int
	for _, r := range results {
		queries, refused, cut = queries+r.Queries, refused+r.Refused, cut+r.Cut
		if r.Failed > 0 || r.Throttled > 0 {
			t.Errorf("process %d worker %d: %d THROTTLED, %d failures, first: %s", r.Process, r.Worker, r.Throttled, r.Failed, r.FirstErr)
		}
	}
	st := sim.Stats()
	allowed := shopsim.DefaultPoints + shopsim.DefaultRestore*duration.Seconds()
	t.Logf("%d queries answered, %d refused by tollgate, %d workers cut off by the end; Shopify ran %d queries for %d points, %.0f%% of the %.0f its bucket allowed, lowest level %.0f, %d THROTTLED; %d REST requests served, %d answered 429",
		queries, refused, cut, st.Queries, st.Points, 100*float64(st.Points)/allowed, allowed, st.Lowest, st.Throttled, st.REST, st.REST429)
	if st.Throttled != 0 || st.Lowest < 0 || st.REST429 != 0 {
		t.Errorf("Shopify throttled %d queries and answered %d REST 429s; its bucket fell to %.0f", st.Throttled, st.REST429, st.Lowest)
	}
	if float64(st.Points) < 0.7*allowed {
		t.Errorf("%d points spent of the %.0f the bucket allowed: under 70%%", st.Points, allowed)
	}
}

// TestWithoutTollgate: the same load, straight to the shop, is throttled.
func TestWithoutTollgate(t *testing.T) {
	sim, results, duration := run(t, true, 6*time.Second)
	var throttled int
	for _, r := range results {
		throttled += r.Throttled
	}
	st := sim.Stats()
	t.Logf("without tollgate: %d queries run for %d points in %v, %d THROTTLED answers, %d REST requests served and %d answered 429 (the workers saw %d refusals)",
		st.Queries, st.Points, duration, st.Throttled, st.REST, st.REST429, throttled)
	if st.Throttled == 0 {
		t.Error("the control run was never throttled: the load is too light to show anything")
	}
}
