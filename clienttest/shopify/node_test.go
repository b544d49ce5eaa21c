package shopify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/shopsim"
)

// nodeEnv names the directory @shopify/admin-api-client was installed
// into (npm install --prefix DIR @shopify/admin-api-client@1); with
// TOLLGATE_REQUIRE_POLYGLOT set, its absence fails the test.
const nodeEnv = "TOLLGATE_SHOPIFY_NODE"

// nodeReport is what the Node service prints.
type nodeReport struct {
	Queries, Throttled, Refused, Failed int
	FirstErr                            string
}

// TestNodeThroughGateway: a Node service on Shopify's official
// @shopify/admin-api-client, through `tollgate serve`, and two Go worker
// processes through providers/shopify, share one shop and token in one
// Redis for 10 seconds. Required: no THROTTLED answer, and at least 70%
// of the points the bucket and its restore rate allowed spent.
func TestNodeThroughGateway(t *testing.T) {
	node, err := exec.LookPath("node")
	dir := os.Getenv(nodeEnv)
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@shopify", "admin-api-client")); err != nil || dir == "" || statErr != nil {
		if os.Getenv("TOLLGATE_REQUIRE_POLYGLOT") != "" {
			t.Fatalf("node (%v) or @shopify/admin-api-client in %s=%q missing", err, nodeEnv, dir)
		}
		t.Skipf("needs node and %s naming a directory holding @shopify/admin-api-client", nodeEnv)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "admin_worker.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tollgate")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tollgate")
	build.Dir = redistest.ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the tollgate command: %v\n%s", err, out)
	}
	sim := shopsim.New(shopsim.Config{Shop: shop, Items: items})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	rdb := redistest.Start(t)
	const shopToken, callerToken = "shpat_shared_token", "tok-node-service-0123"

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	config, _ := json.Marshal(map[string]any{
		"listen":  addr,
		"redis":   "redis://" + rdb.Addr + "/0",
		"callers": []map[string]any{{"name": "node-svc", "token_env": "TOLLGATE_TOKEN_NODE"}},
		"upstreams": []map[string]any{{"name": "shopify", "provider": "shopify", "prefix": "/shopify/",
			"target": api.URL, "key_env": "SHOPIFY_ACCESS_TOKEN", "options": map[string]any{"shop": shop}}},
	})
	file := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(file, config, 0o600); err != nil {
		t.Fatal(err)
	}
	var gwOut bytes.Buffer
	gw := exec.Command(bin, "serve", "-config", file)
	gw.Env = append(os.Environ(), "TOLLGATE_TOKEN_NODE="+callerToken, "SHOPIFY_ACCESS_TOKEN="+shopToken)
	gw.Stdout, gw.Stderr = &gwOut, &gwOut
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate serve not ready after 30s:\n%s", gwOut.String())
		}
	}

	const duration = 10 * time.Second
	start := time.Now().Add(2 * time.Second)
	nodeCmd := exec.Command(node, script)
	nodeCmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "GATEWAY=http://"+addr, "TOKEN="+callerToken,
		"WORKERS=3", "START="+strconv.FormatInt(start.UnixMilli(), 10), "DURATION="+strconv.FormatInt(duration.Milliseconds(), 10))
	var nodeOut bytes.Buffer
	nodeCmd.Stdout, nodeCmd.Stderr = &nodeOut, os.Stderr
	if err := nodeCmd.Start(); err != nil {
		t.Fatal(err)
	}
	var cfgs []any
	for p := range 2 {
		cfgs = append(cfgs, childConfig{API: api.URL, Redis: rdb.Addr, Key: shopToken,
			Minute: time.Minute, Transit: 250 * time.Millisecond, Start: start, Duration: duration, Workers: 3, Process: p})
	}
	goResults := rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...))
	if err := nodeCmd.Wait(); err != nil {
		t.Fatalf("the Node service: %v\n%s", err, nodeOut.String())
	}
	var nr nodeReport
	if err := json.Unmarshal(nodeOut.Bytes(), &nr); err != nil {
		t.Fatalf("the Node service's report %q: %v", nodeOut.String(), err)
	}
	var goQueries int
	for _, rs := range goResults {
		for _, r := range rs {
			goQueries += r.Queries
			if r.Failed > 0 || r.Throttled > 0 {
				t.Errorf("Go process %d worker %d: %d THROTTLED, %d failures, first: %s", r.Process, r.Worker, r.Throttled, r.Failed, r.FirstErr)
			}
		}
	}
	st := sim.Stats()
	allowed := shopsim.DefaultPoints + shopsim.DefaultRestore*duration.Seconds()
	t.Logf("Node (@shopify/admin-api-client through the gateway): %d queries, %d THROTTLED, %d refused by tollgate; Go processes: %d queries; Shopify ran %d queries for %d points, %.0f%% of the %.0f its bucket allowed, lowest level %.0f, %d THROTTLED, %d REST 429s",
		nr.Queries, nr.Throttled, nr.Refused, goQueries, st.Queries, st.Points, 100*float64(st.Points)/allowed, allowed, st.Lowest, st.Throttled, st.REST429)
	if nr.Failed > 0 || nr.Queries == 0 {
		t.Errorf("the Node service: %d queries, %d failures, first: %s", nr.Queries, nr.Failed, nr.FirstErr)
	}
	if st.Throttled != 0 || st.REST429 != 0 || st.Lowest < 0 || nr.Throttled != 0 {
		t.Errorf("Shopify throttled %d queries and answered %d 429s; its bucket fell to %.0f", st.Throttled, st.REST429, st.Lowest)
	}
	if float64(st.Points) < 0.7*allowed {
		t.Errorf("%d points spent of the %.0f the bucket allowed: under 70%%", st.Points, allowed)
	}
	if t.Failed() {
		fmt.Fprintln(os.Stderr, gwOut.String())
	}
}
