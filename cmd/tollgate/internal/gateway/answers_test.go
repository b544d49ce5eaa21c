package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/quota"
)

// youtubeConfig serves a simulated YouTube under /youtube/ to two
// callers, with options and a policy.
func youtubeConfig(target, options, policy string) string {
	if policy == "" {
		policy = "null"
	}
	return fmt.Sprintf(`{
  "listen": "127.0.0.1:0",
  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
  "upstreams": [{"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q,
    "key_env": "YT_KEY", "options": %s, "policy": %s}]
}`, target+"/youtube", options, policy)
}

// newSim serves a simulated YouTube on loopback that knows realKey.
func newSim(t *testing.T, cfg ytsim.Config) (*ytsim.Server, string) {
	t.Helper()
	cfg.Projects = map[string]string{realKey: "project-1"}
	sim := ytsim.New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

// bufioReader reads a raw request.
func bufioReader(raw string) *bufio.Reader { return bufio.NewReader(strings.NewReader(raw)) }

// TestAnswers: what the gateway answers for each kind of request, and
// whether the upstream saw it.
func TestAnswers(t *testing.T) {
	const list = "/youtube/v3/videos?part=id&chart=mostPopular&regionCode=FR"
	bearer := map[string]string{"Authorization": "Bearer " + phpToken}
	cases := []struct {
		name    string
		path    string
		header  map[string]string
		setup   func(t *testing.T, r *running, sim *ytsim.Server)
		status  int
		cause   string // the JSON body's cause, for the gateway's own answers
		retry   bool   // a Retry-After is due
		reached int    // requests the upstream received
	}{
		{name: "bearer token", path: list, header: bearer, status: 200, reached: 1},
		{name: "key= token", path: list + "&key=" + phpToken, status: 200, reached: 1},
		{name: "X-Goog-Api-Key token", path: list, header: map[string]string{"X-Goog-Api-Key": nodeToken}, status: 200, reached: 1},
		{name: "no token", path: list, status: 401},
		{name: "unknown token", path: list, header: map[string]string{"Authorization": "Bearer nope"}, status: 401},
		{name: "the upstream's own key", path: list + "&key=" + realKey, status: 401},
		{name: "the upstream's own key beside a token", path: list + "&key=" + realKey, header: bearer, status: 401},
		{name: "tokens of two callers", path: list + "&key=" + nodeToken, header: bearer, status: 401},
		{name: "basic auth", path: list, header: map[string]string{"Authorization": "Basic cGhwOnRvaw=="}, status: 401},
		{name: "no prefix", path: "/openai/v1/models", header: bearer, status: 404},
		{name: "prefix without its slash", path: "/youtube", header: bearer, status: 404},
		{name: "dot segments", path: "/youtube/v3/%2e%2e/%2e%2e/x", header: bearer, status: 400},
		{name: "no room", path: list, header: bearer, status: 429, cause: "no_room", retry: true, reached: 3,
			setup: func(t *testing.T, r *running, _ *ytsim.Server) {
				for i := range 3 {
					if code, _, b := do(t, "GET", r.url+list, bearer, nil); code != 200 {
						t.Fatalf("request %d: %d %s, want 200", i, code, b)
					}
				}
			}},
		{name: "operator's pause", path: list, header: bearer, status: 429, cause: "paused_by_operator", retry: true,
			setup: func(t *testing.T, r *running, _ *ytsim.Server) {
				lim, err := quota.New(r.rdb)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := lim.PauseBecause(context.Background(), "default", "", 30*time.Second, "deploy"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "upstream's quotaExceeded passes through", path: list, header: bearer, status: 403, reached: 1,
			setup: func(t *testing.T, _ *running, sim *ytsim.Server) {
				if err := sim.Inject("videos.list", ytsim.QuotaExceeded); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "upstream's pause", path: list, header: bearer, status: 429, cause: "paused_by_upstream", retry: true, reached: 1,
			setup: func(t *testing.T, r *running, sim *ytsim.Server) {
				if err := sim.Inject("videos.list", ytsim.QuotaExceeded); err != nil {
					t.Fatal(err)
				}
				if code, _, b := do(t, "GET", r.url+list, bearer, nil); code != 403 || !strings.Contains(b, "quotaExceeded") {
					t.Fatalf("first request: %d %s, want YouTube's 403 quotaExceeded", code, b)
				}
			}},
		{name: "redis down", path: list, header: bearer, status: 503, cause: "redis_unavailable", retry: true,
			setup: func(t *testing.T, r *running, _ *ytsim.Server) { r.srv.Kill() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, simURL := newSim(t, ytsim.Config{Quota: 1000, Window: time.Hour})
			r := start(t, youtubeConfig(simURL, `{"quota": 3, "window": "1m", "table": "classic", "reserve_percent": -1}`,
				`{"on_refusal": "fail", "max_wait": "1s"}`), tollgate.Config{})
			if tc.setup != nil {
				tc.setup(t, r, sim)
			}
			code, h, b := do(t, "GET", r.url+tc.path, tc.header, nil)
			if code != tc.status {
				t.Fatalf("status %d (%s), want %d", code, b, tc.status)
			}
			noSecrets(t, "the answer", b)
			if got := len(sim.Arrivals()); got != tc.reached {
				t.Errorf("the upstream received %d requests, want %d", got, tc.reached)
			}
			if tc.retry {
				secs, err := strconv.Atoi(h.Get("Retry-After"))
				if err != nil || secs < 1 {
					t.Errorf("Retry-After %q, want whole seconds, at least 1", h.Get("Retry-After"))
				}
				if tc.cause != "" && errorBody(t, b).RetryAfter != int64(secs) {
					t.Errorf("body's retry_after %d, header's %d", errorBody(t, b).RetryAfter, secs)
				}
			}
			if tc.cause != "" {
				eb := errorBody(t, b)
				if eb.Cause != tc.cause || eb.Upstream != "youtube" || eb.Code != tc.status {
					t.Errorf("body %+v, want cause %q of upstream youtube, code %d", eb, tc.cause, tc.status)
				}
				if tc.status == 429 && tc.cause == "no_room" && eb.Bucket != "pool" {
					t.Errorf("bucket %q, want pool", eb.Bucket)
				}
			}
			if code == 401 && h.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// TestRetryAfterRounding: the 429's Retry-After is QuotaError.ServeHTTP's.
func TestRetryAfterRounding(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 1001 * time.Millisecond, 41*time.Second + 1} {
		qe := &tollgate.QuotaError{RetryAfter: d, Bucket: "pool"}
		want := httptest.NewRecorder()
		qe.ServeHTTP(want, nil)
		got := httptest.NewRecorder()
		quotaAnswer(got, "youtube", qe)
		if got.Code != want.Code || got.Header().Get("Retry-After") != want.Header().Get("Retry-After") {
			t.Errorf("%v: %d Retry-After %q, want %d %q", d, got.Code, got.Header().Get("Retry-After"), want.Code, want.Header().Get("Retry-After"))
		}
	}
}

// TestCredentials: the upstream gets its own key in X-Goog-Api-Key, never
// in the URL, and none of the caller's credentials.
func TestCredentials(t *testing.T) {
	up := newEcho(t)
	r := start(t, youtubeConfig(up.URL, `{"table": "classic"}`, ""), tollgate.Config{})
	code, _, b := do(t, "GET", r.url+"/youtube/v3/videos?part=id&key="+phpToken+"&chart=mostPopular",
		map[string]string{"X-Goog-Api-Key": phpToken, "Authorization": "Bearer " + phpToken}, nil)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	got := seen[0]
	if k := got.Header.Get("X-Goog-Api-Key"); k != realKey {
		t.Errorf("X-Goog-Api-Key %q, want the upstream's key", k)
	}
	if a := got.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q reached the upstream", a)
	}
	if q := got.URL.RawQuery; q != "part=id&chart=mostPopular" {
		t.Errorf("query %q, want part=id&chart=mostPopular (no key, order kept)", q)
	}
}

// TestLoopbackOnly: without callers, only loopback clients are served,
// and each one's own key passes through, in a header.
func TestLoopbackOnly(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"upstreams": [{"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q}]}`, up.URL+"/youtube")
	r := start(t, cfg, tollgate.Config{})
	code, _, b := do(t, "GET", r.url+"/youtube/v3/videos?part=id&key=callers-own-key", nil, nil)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	got := up.requests()[0]
	if got.Header.Get("X-Goog-Api-Key") != "callers-own-key" || got.URL.Query().Has("key") {
		t.Errorf("upstream got header %q and query %q; want the caller's key in the header only", got.Header.Get("X-Goog-Api-Key"), got.URL.RawQuery)
	}
	req := httptest.NewRequest("GET", "/youtube/v3/videos?part=id", nil)
	req.RemoteAddr = "192.0.2.7:4000"
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(up.requests()) != 1 {
		t.Errorf("a remote client got %d, upstream saw %d requests; want 403 and 1", rec.Code, len(up.requests()))
	}
	var desc strings.Builder
	r.Describe(&desc)
	if !strings.Contains(desc.String(), "loopback clients only") {
		t.Errorf("Describe %q does not say loopback only", desc.String())
	}
}

// TestNotAnOpenProxy: CONNECT and absolute URIs are refused and never
// forwarded.
func TestNotAnOpenProxy(t *testing.T) {
	up := newEcho(t)
	r := start(t, youtubeConfig(up.URL, `{}`, ""), tollgate.Config{})
	for _, raw := range []string{
		"CONNECT " + strings.TrimPrefix(up.URL, "http://") + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + phpToken + "\r\n\r\n",
		"GET " + up.URL + "/youtube/v3/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + phpToken + "\r\n\r\n",
		"GET http://evil.example/youtube/v3/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + phpToken + "\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + phpToken + "\r\n\r\n",
	} {
		req, err := http.ReadRequest(bufioReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code < 400 || rec.Code >= 500 {
			t.Errorf("%q: %d, want a refusal", strings.SplitN(raw, "\r\n", 2)[0], rec.Code)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}
