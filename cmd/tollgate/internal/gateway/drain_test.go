package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// slowUpstream answers "part1", then after pause "part2"; started is
// told when a request arrives.
func slowUpstream(t *testing.T, pause time.Duration, started chan<- struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-time.After(pause):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "part2")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// result is one request's outcome.
type result struct {
	code  int
	retry string
	body  string
	err   error
}

func get(url string, header map[string]string) result {
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{code: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: string(b), err: err}
}

// TestDrain: on shutdown, a request in flight upstream finishes, one
// waiting for its turn gets 503 with Retry-After, new connections are
// refused, and Serve returns nil.
func TestDrain(t *testing.T) {
	started := make(chan struct{}, 1)
	up := slowUpstream(t, 800*time.Millisecond, started)
	waiting := make(chan struct{}, 1)
	hooks := tollgate.Config{Trace: tollgate.Trace{WaitStarted: func(context.Context, tollgate.Decision) {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}}}
	r := start(t, youtubeConfig(up.URL, `{"quota": 1, "window": "20s", "table": "classic", "reserve_percent": -1}`,
		`{"on_refusal": "wait", "max_wait": "30s"}`), hooks)
	bearer := map[string]string{"Authorization": "Bearer " + phpToken}
	list := r.url + "/youtube/v3/videos?part=id&chart=mostPopular"

	var wg sync.WaitGroup
	var inFlight, waiter result
	wg.Go(func() { inFlight = get(list, bearer) })
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the upstream")
	}
	wg.Go(func() { waiter = get(list, bearer) })
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the second request never waited for its turn")
	}
	stopped := time.Now()
	r.stop()
	wg.Wait()
	if err := <-r.done; err != nil {
		t.Errorf("Serve: %v, want nil", err)
	}
	r.done <- nil // for the cleanup
	if inFlight.err != nil || inFlight.code != 200 || inFlight.body != "part1part2" {
		t.Errorf("the request in flight: %d %q %v; want 200 part1part2", inFlight.code, inFlight.body, inFlight.err)
	}
	if waiter.err != nil || waiter.code != 503 || waiter.retry == "" || !strings.Contains(waiter.body, "shutting_down") {
		t.Errorf("the waiting request: %d Retry-After %q %q %v; want 503 with Retry-After, shutting_down", waiter.code, waiter.retry, waiter.body, waiter.err)
	}
	if d := time.Since(stopped); d > 6*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(r.url, "http://"), time.Second); err == nil {
		c.Close()
		t.Error("the gateway still accepts connections after its shutdown")
	}
}

// TestDrainCutsAtTheBound: a stream longer than the drain bound is cut
// at the bound, and Serve returns.
func TestDrainCutsAtTheBound(t *testing.T) {
	started := make(chan struct{}, 1)
	up := slowUpstream(t, time.Minute, started)
	cfg := strings.Replace(youtubeConfig(up.URL, `{"table": "classic"}`, ""), `"listen"`, `"limits": {"drain": "500ms"}, "listen"`, 1)
	r := start(t, cfg, tollgate.Config{})
	done := make(chan result, 1)
	go func() {
		done <- get(r.url+"/youtube/v3/videos?part=id", map[string]string{"Authorization": "Bearer " + phpToken})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	stopped := time.Now()
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		r.done <- nil
	case <-time.After(8 * time.Second):
		t.Fatal("Serve did not return within 8s, with a drain bound of 500ms")
	}
	if d := time.Since(stopped); d < 400*time.Millisecond {
		t.Errorf("Serve returned %v after the stop: before the drain bound", d)
	}
	res := <-done
	if res.err == nil && res.body == "part1part2" {
		t.Errorf("the stream was not cut: %q", res.body)
	}
}

// TestDrainFinishesArrivingBody: a request whose headers arrived before
// the shutdown, its body still arriving, is served when it completes
// within the drain bound, counted (OpenAI) or streamed (YouTube); a new
// request on another connection is refused.
func TestDrainFinishesArrivingBody(t *testing.T) {
	for _, c := range []struct{ name, path, body string }{
		{"counted", "/openai/v1/chat/completions", chatOf("gpt-4o-mini", 64<<10)},
		{"streamed", "/youtube/v3/videos/rate?id=x&rating=like", strings.Repeat("v", 64<<10)},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newEcho(t)
			cfg := fmt.Sprintf(`{"limits": {"drain": "3s"}, "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
			  "upstreams": [
			    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY"},
			    {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY"}]}`,
				up.URL+"/youtube", up.URL)
			r := start(t, cfg, tollgate.Config{})
			addr := strings.TrimPrefix(r.url, "http://")
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			half := len(c.body) / 2
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				c.path, addr, phpToken, len(c.body), c.body[:half])
			deadline := time.Now().Add(5 * time.Second)
			for {
				r.mu.Lock()
				n := len(r.flights)
				r.mu.Unlock()
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the request never entered the gateway")
				}
				time.Sleep(10 * time.Millisecond)
			}
			r.stop()
			time.Sleep(300 * time.Millisecond)
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Error("a new connection was accepted while draining")
			}
			if _, err := io.WriteString(conn, c.body[half:]); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(up.requests()) != 1 {
				t.Errorf("the request whose body arrived during the drain: %d %s, upstream saw %d; want 200, sent", resp.StatusCode, b, len(up.requests()))
			}
		})
	}
}
