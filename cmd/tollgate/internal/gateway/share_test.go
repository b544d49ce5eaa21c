package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/gemsim"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/youtube"
)

// TestSharesQuotaWithGoProcess: the gateway's youtube upstream and a Go
// process's youtube.NewTransport with the same key, pool and limits, on
// the same Redis, spend one quota: each sees the other's units, and
// together they are refused at the limit less the reserve.
func TestSharesQuotaWithGoProcess(t *testing.T) {
	for _, pool := range []string{"", "project-1"} {
		t.Run("pool="+pool, func(t *testing.T) {
			sim, simURL := newSim(t, ytsim.Config{Quota: 1000, Window: time.Hour})
			opts := `{"quota": 20, "window": "10s", "table": "classic"}`
			if pool != "" {
				opts = `{"quota": 20, "window": "10s", "table": "classic", "pool": "project-1"}`
			}
			r := start(t, youtubeConfig(simURL, opts, `{"on_refusal": "fail"}`), tollgate.Config{})

			host, _ := url.Parse(simURL)
			goOpts := &youtube.Options{Quota: 20, Window: 10 * time.Second, Table: youtube.Classic(host.Host),
				Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}}
			keys := []string{realKey}
			scope := youtube.DefaultProject
			if pool != "" {
				goOpts.Projects, keys, scope = map[string][]string{pool: {realKey}}, nil, pool
			}
			tr, err := youtube.NewTransport(keys, r.rdb, goOpts)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			client := &http.Client{Transport: tr}

			bearer := map[string]string{"Authorization": "Bearer " + phpToken}
			gateway, goProcess := 0, 0
			// 20 units less the 5% reserve: 19 admitted, by both together.
			for i := range 30 {
				if i%2 == 0 {
					if code, _, b := do(t, "GET", r.url+"/youtube/v3/videos?part=id&chart=mostPopular", bearer, nil); code == 200 {
						gateway++
					} else if code != 429 {
						t.Fatalf("gateway: %d %s", code, b)
					}
					continue
				}
				resp, err := client.Get(simURL + "/youtube/v3/videos?part=id&chart=mostPopular")
				if err == nil {
					resp.Body.Close()
					goProcess++
				}
			}
			if gateway+goProcess != 19 || gateway == 0 || goProcess == 0 {
				t.Errorf("admitted: gateway %d, Go process %d; want 19 together, some each", gateway, goProcess)
			}
			u, err := tr.Usage(context.Background(), scope, youtube.Pool)
			if err != nil || len(u) == 0 || u[0].Used != 19 {
				t.Errorf("the Go process's Usage %+v %v, want 19 used", u, err)
			}
			if st := sim.Stats()["project-1"]; st.Requests != 19 || st.QuotaErrors != 0 {
				t.Errorf("the upstream saw %+v, want 19 requests and no quota error", st)
			}
		})
	}
}

// TestCustomProvider: a custom upstream charges its cost table's buckets,
// sends its key in the header configured, and refuses past the limit.
func TestCustomProvider(t *testing.T) {
	up := newEcho(t)
	host, _ := url.Parse(up.URL)
	dir := t.TempDir()
	costsJSON := fmt.Sprintf(`{"buckets": ["pool"], "rules": [{"pattern": "GET %s/api/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 5}]}],
	  "default": {"endpoint": "other", "charges": [{"bucket": "pool", "units": 1}]}}`, host.Hostname())
	if err := os.WriteFile(filepath.Join(dir, "costs.json"), []byte(costsJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [{"name": "shop", "provider": "custom", "prefix": "/shop/", "target": %q, "key_env": "YT_KEY",
	    "costs": %q, "options": {"key_header": "X-Shop-Key"}, "policy": {"on_refusal": "fail"},
	    "buckets": {"pool": {"limits": [{"units": 10, "window": "1m"}, {"units": 1000, "window": "day", "zone": "America/New_York"}]}}}]}`,
		up.URL, filepath.Join(dir, "costs.json"))
	var decided decisions
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	bearer := map[string]string{"Authorization": "Bearer " + phpToken}
	for i, want := range []int{200, 200, 429} {
		code, _, b := do(t, "GET", r.url+"/shop/api/search?q=x", bearer, nil)
		if code != want {
			t.Fatalf("request %d: %d %s, want %d", i, code, b, want)
		}
		if code == 429 && errorBody(t, b).Bucket != "pool" {
			t.Errorf("429 body %s, want bucket pool", b)
		}
	}
	seen := up.requests()
	if len(seen) != 2 || seen[0].Header.Get("X-Shop-Key") != realKey || seen[0].Header.Get("Authorization") != "" {
		t.Errorf("upstream saw %d requests, first with X-Shop-Key %q and Authorization %q", len(seen), seen[0].Header.Get("X-Shop-Key"), seen[0].Header.Get("Authorization"))
	}
	for _, d := range decided.list() {
		if d.Endpoint != "search" || d.Caller != "php-cron" || d.Scope != "default" {
			t.Errorf("decision %+v, want search by php-cron in the default scope", d)
		}
	}
}

// TestGemini: a Gemini request through the gateway reaches the simulated
// API with the upstream's key in X-Goog-Api-Key, and is charged to the
// scope a Go process's gemini.NewTransport charges for that key and
// model.
func TestGemini(t *testing.T) {
	sim := gemsim.New(gemsim.Config{Models: map[string]gemsim.Limits{"gemini-2.5-flash": {RPM: 100, TPM: 100000, RPD: 1000}}})
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	var decided decisions
	cfg := fmt.Sprintf(`{"callers": [{"name": "node", "token_env": "TOKEN_NODE"}],
	  "upstreams": [{"name": "gemini", "provider": "gemini", "prefix": "/gemini/", "target": %q, "key_env": "YT_KEY",
	    "options": {"rpm": 10, "tpm": 10000, "rpd": 100}}]}`, up.URL)
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	body := `{"contents": [{"parts": [{"text": "Hello"}]}]}`
	code, _, b := do(t, "POST", r.url+"/gemini/v1beta/models/gemini-2.5-flash:generateContent?key="+nodeToken,
		map[string]string{"Content-Type": "application/json"}, strings.NewReader(body))
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	noSecrets(t, "the answer", b)
	a := sim.Arrivals()
	sum := sha256.Sum256([]byte(realKey))
	if len(a) != 1 || a[0].Project != hex.EncodeToString(sum[:8]) {
		t.Errorf("the simulator saw %+v, want one request of the upstream key's project", a)
	}
	d := decided.list()
	if len(d) == 0 || d[0].Scope != gemini.Scope(realKey, "gemini-2.5-flash") || d[0].Caller != "node" {
		t.Errorf("decisions %+v, want the scope gemini.Scope gives the key and model, by node", d)
	}
}
