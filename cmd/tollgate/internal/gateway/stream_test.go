package gateway

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/oaisim"
)

// gatedWriter holds a stream after its first flush until the client has
// read the first event: a gateway that buffered the stream would never
// let the client see it, and the gate would time out.
type gatedWriter struct {
	http.ResponseWriter
	seen    <-chan struct{}
	flushes int
	timeout *atomic.Bool
}

func (g *gatedWriter) Flush() {
	g.ResponseWriter.(http.Flusher).Flush()
	g.flushes++
	if g.flushes == 1 {
		select {
		case <-g.seen:
		case <-time.After(10 * time.Second):
			g.timeout.Store(true)
		}
	}
}

// TestStreamUnbuffered: an OpenAI stream passes through the gateway event
// by event (the simulator sends its second event only once the client
// has read the first), completes, and is settled from its usage; every
// decision names the caller.
func TestStreamUnbuffered(t *testing.T) {
	sim := oaisim.New(oaisim.Config{CountUsage: true})
	seen := make(chan struct{})
	var timedOut atomic.Bool
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sim.ServeHTTP(&gatedWriter{ResponseWriter: w, seen: seen, timeout: &timedOut}, r)
	}))
	t.Cleanup(upstream.Close)

	var decided, settled decisions
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
	  "upstreams": [{"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY",
	    "options": {"rpm": 100, "tpm": 20000, "count_usage": true}}]}`, upstream.URL)
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook, Settled: settled.hook}})

	body := `{"model": "gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 400,
	  "messages": [{"role": "user", "content": "Say hello in a few words."}]}`
	req, _ := http.NewRequest("POST", r.url+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+nodeToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s, want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	events, done := 0, false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		events++
		if events == 1 {
			close(seen)
		}
		if line == "data: [DONE]" {
			done = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if timedOut.Load() {
		t.Fatal("the client did not see the first event before the upstream sent the rest: the gateway buffered the stream")
	}
	if !done || events < 3 {
		t.Fatalf("the stream ended after %d events, done %v", events, done)
	}
	if a := sim.Arrivals(); len(a) != 1 || !a[0].Stream || a[0].Status != 200 {
		t.Fatalf("the simulator saw %+v, want one streamed request answered 200", a)
	}
	// Settlement runs when the body ends, which the gateway's copy reached
	// before the client did: wait for it a little.
	deadline := time.Now().Add(10 * time.Second)
	for len(settled.list()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := settled.list()
	if len(s) != 1 || !s[0].Settled || s[0].Err != nil {
		t.Fatalf("settlements %+v, want one, settled from the stream's usage", s)
	}
	var tokens, estimate int64
	for _, c := range s[0].Charges {
		if c.Bucket == "tokens" {
			tokens = c.Units
		}
	}
	for _, c := range s[0].Estimate {
		if c.Bucket == "tokens" {
			estimate = c.Units
		}
	}
	if tokens <= 0 || tokens >= estimate {
		t.Errorf("settled at %d tokens from an estimate of %d: want the usage, below the estimate's max_tokens", tokens, estimate)
	}
	d := decided.list()
	if len(d) == 0 {
		t.Fatal("no decision")
	}
	for _, ev := range append(d, s...) {
		if ev.Caller != "node" {
			t.Errorf("decision %+v names caller %q, want node", ev, ev.Caller)
		}
	}
}
