package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
)

// Secrets of the tests: a caller's token and the upstream's key.
const (
	phpToken  = "tok-php-0123456789abcdef"
	nodeToken = "tok-node-fedcba9876543210"
	realKey   = "real-key-AIzaSyTEST000000"
	antKey    = "sk-ant-real-key-000000000"
)

// env are the environment variables the tests' configurations name.
var env = map[string]string{
	"TOKEN_PHP":  phpToken,
	"TOKEN_NODE": nodeToken,
	"YT_KEY":     realKey,
	"OAI_KEY":    "sk-real-openai-key",
	"ANT_KEY":    antKey,
	"SHOP_TOKEN": shopToken,
}

func getenv(k string) string { return env[k] }

// running is a gateway serving on loopback.
type running struct {
	*Gateway
	url  string
	rdb  *redis.Client
	srv  *redistest.Server
	stop context.CancelFunc
	done chan error
}

// start builds a gateway of a JSON configuration on a real Redis and
// serves it on a loopback port until the test ends.
func start(t *testing.T, config string, hooks tollgate.Config) *running {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	return startOn(t, config, hooks, srv, rdb)
}

func startOn(t *testing.T, config string, hooks tollgate.Config, srv *redistest.Server, rdb *redis.Client) *running {
	t.Helper()
	cfg, err := Load([]byte(config), t.TempDir(), getenv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	g, err := Build(cfg, Options{Redis: rdb, Hooks: hooks})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Gateway: g, url: "http://" + ln.Addr().String(), rdb: rdb, srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return within 15s of its context's end")
		}
		g.Close()
	})
	return r
}

// echo is an upstream that records what it received and answers 200
// with a JSON of it.
type echo struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	e := &echo{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		e.mu.Lock()
		e.seen = append(e.seen, r.Clone(context.Background()))
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"host": r.Host, "path": r.URL.Path, "raw": r.URL.EscapedPath(), "query": r.URL.RawQuery})
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *echo) requests() []*http.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*http.Request(nil), e.seen...)
}

// do sends a request to the gateway and returns its status, headers and
// body.
func do(t *testing.T, method, url string, header map[string]string, body io.Reader) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// errorBody decodes the gateway's JSON answer.
func errorBody(t *testing.T, s string) body {
	t.Helper()
	var b map[string]body
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatalf("answer %q is not the gateway's JSON: %v", s, err)
	}
	return b["error"]
}

// noSecrets fails when s shows a token or a key.
func noSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{phpToken, nodeToken, realKey, "sk-real-openai-key", antKey} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows a secret: %q", what, s)
		}
	}
}

// decisions records the Decisions of a hook.
type decisions struct {
	mu  sync.Mutex
	all []tollgate.Decision
}

func (d *decisions) hook(_ context.Context, ev tollgate.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, ev)
}

func (d *decisions) list() []tollgate.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]tollgate.Decision(nil), d.all...)
}
