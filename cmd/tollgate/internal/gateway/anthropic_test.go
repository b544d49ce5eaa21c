package gateway

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/anthsim"
	"github.com/tollgate/tollgate/providers/anthropic"
)

// anthUpstream is a simulated Anthropic API on loopback that records the
// credentials and version of each request it receives.
type anthUpstream struct {
	*anthsim.Server
	url string

	mu   sync.Mutex
	seen []http.Header
}

func newAnthUpstream(t *testing.T) *anthUpstream {
	t.Helper()
	a := &anthUpstream{Server: anthsim.New(anthsim.Config{Limits: anthsim.Limits{RPM: 1000, ITPM: 1000000, OTPM: 100000}})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Clone())
		a.mu.Unlock()
		a.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *anthUpstream) headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.seen...)
}

// anthropicConfig serves the API under /anthropic/ to two callers with
// the upstream's key.
func anthropicConfig(target string) string {
	return fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
	  "upstreams": [{"name": "anthropic", "provider": "anthropic", "prefix": "/anthropic/", "target": %q, "key_env": "ANT_KEY",
	    "options": {"rpm": 100, "itpm": 100000, "otpm": 20000}}]}`, target)
}

// anthMessage is a Messages body.
func anthMessage(stream bool) string {
	return fmt.Sprintf(`{"model": "claude-sonnet-4-5", "max_tokens": 400, "stream": %v, "messages": [{"role": "user", "content": "Say hello."}]}`, stream)
}

// TestAnthropicCredentials: a caller presents its token as Anthropic's
// SDKs send their key (x-api-key) or in any other place; the upstream
// gets the gateway's key in x-api-key, none of the caller's credentials,
// and anthropic-version as the caller sent it; a bad token never reaches
// it.
func TestAnthropicCredentials(t *testing.T) {
	const path = "/anthropic/v1/messages"
	version := map[string]string{"Anthropic-Version": "2023-06-01", "Content-Type": "application/json"}
	with := func(h map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range version {
			out[k] = v
		}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"x-api-key token", with(map[string]string{"X-Api-Key": phpToken}), 200},
		{"bearer token", with(map[string]string{"Authorization": "Bearer " + nodeToken}), 200},
		{"x-api-key and bearer of one caller", with(map[string]string{"X-Api-Key": nodeToken, "Authorization": "Bearer " + nodeToken}), 200},
		{"bad x-api-key", with(map[string]string{"X-Api-Key": "sk-ant-guess"}), 401},
		{"no token", version, 401},
		{"the upstream's own key", with(map[string]string{"X-Api-Key": antKey}), 401},
		{"x-api-key and bearer of two callers", with(map[string]string{"X-Api-Key": phpToken, "Authorization": "Bearer " + nodeToken}), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newAnthUpstream(t)
			r := start(t, anthropicConfig(up.url), tollgate.Config{})
			code, h, b := do(t, "POST", r.url+path, tc.header, strings.NewReader(anthMessage(false)))
			if code != tc.status {
				t.Fatalf("status %d (%s), want %d", code, b, tc.status)
			}
			noSecrets(t, "the answer", b)
			seen := up.headers()
			if tc.status != 200 {
				if len(seen) != 0 {
					t.Errorf("the upstream received %d requests, want none", len(seen))
				}
				if eb := errorBody(t, b); eb.Code != 401 || h.Get("WWW-Authenticate") == "" || !strings.Contains(eb.Message, "x-api-key") {
					t.Errorf("answer %+v (WWW-Authenticate %q), want the gateway's 401 naming x-api-key", eb, h.Get("WWW-Authenticate"))
				}
				return
			}
			if len(seen) != 1 {
				t.Fatalf("the upstream received %d requests, want 1", len(seen))
			}
			got := seen[0]
			if got.Get("X-Api-Key") != antKey || len(got.Values("X-Api-Key")) != 1 || got.Get("Authorization") != "" || got.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("the upstream got x-api-key of %d bytes (%d values), Authorization %q, anthropic-version %q; want the gateway's key alone, no Authorization, the caller's version",
					len(got.Get("X-Api-Key")), len(got.Values("X-Api-Key")), got.Get("Authorization"), got.Get("Anthropic-Version"))
			}
			if a := up.Arrivals(); len(a) != 1 || a[0].Status != 200 {
				t.Errorf("the simulator answered %+v, want one 200", a)
			}
		})
	}
}

// TestAnthropicStream: a streamed Messages answer passes through the
// gateway event by event and whole, is charged to the scope a Go
// process's anthropic.NewTransport charges for the gateway's key and the
// model, and is settled from the stream (input from message_start, output
// from message_delta), by the caller's name.
func TestAnthropicStream(t *testing.T) {
	up := newAnthUpstream(t)
	var decided, settled decisions
	r := start(t, anthropicConfig(up.url), tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook, Settled: settled.hook}})
	req, _ := http.NewRequest("POST", r.url+"/anthropic/v1/messages", strings.NewReader(anthMessage(true)))
	req.Header.Set("X-Api-Key", nodeToken)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s, want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if len(events) < 4 || events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Fatalf("events %v, want message_start ... message_stop", events)
	}
	a := up.Arrivals()
	if len(a) != 1 || !a[0].Stream || a[0].Status != 200 {
		t.Fatalf("the simulator saw %+v, want one streamed request answered 200", a)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(settled.list()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := settled.list()
	if len(s) != 1 || s[0].Err != nil {
		t.Fatalf("settlements %+v, want one", s)
	}
	want := map[string]int64{anthropic.Requests: 1, anthropic.InputTokens: a[0].Usage.InputTokens, anthropic.OutputTokens: a[0].Usage.OutputTokens}
	for _, c := range s[0].Charges {
		if c.Units != want[c.Bucket] {
			t.Errorf("%s settled to %d, the stream told %d", c.Bucket, c.Units, want[c.Bucket])
		}
	}
	d := decided.list()
	if len(d) == 0 {
		t.Fatal("no decision")
	}
	for _, ev := range append(d, s...) {
		if ev.Caller != "node" || ev.Scope != anthropic.Scope(antKey, "claude-sonnet-4-5") {
			t.Errorf("decision of %q in scope %q, want node in anthropic.Scope(key, model)", ev.Caller, ev.Scope)
		}
	}
}

// TestAnthropicLoopback: without callers and key_env, a loopback
// client's own x-api-key passes through, and its requests are charged to
// the scope of that key, as the provider scopes it.
func TestAnthropicLoopback(t *testing.T) {
	up := newAnthUpstream(t)
	var decided decisions
	cfg := fmt.Sprintf(`{"upstreams": [{"name": "anthropic", "provider": "anthropic", "prefix": "/anthropic/", "target": %q,
	  "options": {"rpm": 100, "itpm": 100000, "otpm": 20000}}]}`, up.url)
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	for _, k := range []string{"sk-ant-callers-own-1", "sk-ant-callers-own-2"} {
		code, _, b := do(t, "POST", r.url+"/anthropic/v1/messages",
			map[string]string{"X-Api-Key": k, "Anthropic-Version": "2023-06-01"}, strings.NewReader(anthMessage(false)))
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	seen := up.headers()
	d := decided.list()
	if len(seen) != 2 || len(d) != 2 {
		t.Fatalf("the upstream saw %d requests, %d decisions; want 2 and 2", len(seen), len(d))
	}
	for i, k := range []string{"sk-ant-callers-own-1", "sk-ant-callers-own-2"} {
		if seen[i].Get("X-Api-Key") != k {
			t.Errorf("request %d: the caller's own key did not pass through", i)
		}
		if d[i].Scope != anthropic.Scope(k, "claude-sonnet-4-5") || strings.Contains(d[i].Scope, k) {
			t.Errorf("request %d: scope %q, want anthropic.Scope of the caller's key", i, d[i].Scope)
		}
	}
}
