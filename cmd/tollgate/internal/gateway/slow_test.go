package gateway

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// stall opens a connection to the gateway, sends a request's headers
// announcing a body of 200,000 bytes and one byte of it, then nothing.
func stall(t *testing.T, addr, path, auth string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n"
	if auth != "" {
		head += "Authorization: Bearer " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reads c until the gateway closes it, and returns how long
// that took, or false when it is still open after limit.
func closedWithin(c net.Conn, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return 0, false
	}
	return time.Since(start), true
}

// TestSlowBodies: bodies that stop arriving are cut within the body
// timeout (an unauthenticated one is answered at once, its body unread),
// and a normal request is served meanwhile.
func TestSlowBodies(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"limits": {"body_timeout": "500ms"},
	  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [
	    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY"},
	    {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY"}]}`,
		up.URL+"/youtube", up.URL)
	r := start(t, cfg, tollgate.Config{})
	addr := strings.TrimPrefix(r.url, "http://")
	cases := []struct {
		path, auth string
		bound      time.Duration // the gateway closes the connection within
	}{
		{"/openai/v1/chat/completions", phpToken, 500*time.Millisecond + time.Second}, // counted: the provider reads it
		{"/youtube/v3/videos/rate?id=x&rating=like", phpToken, 500*time.Millisecond + time.Second},
		{"/openai/v1/chat/completions", "", time.Second}, // 401, body unread
		{"/openai/v1/chat/completions", "wrong-token", time.Second},
	}
	for round := range 2 {
		var wg sync.WaitGroup
		for _, c := range cases {
			conn := stall(t, addr, c.path, c.auth)
			wg.Go(func() {
				d, ok := closedWithin(conn, c.bound+3*time.Second)
				if !ok || d > c.bound {
					t.Errorf("round %d: %s with token %q: closed %v after %v; want within %v", round, c.path, c.auth, ok, d, c.bound)
				}
			})
		}
		code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer " + phpToken}, strings.NewReader(chatBody))
		if code != 200 {
			t.Errorf("a normal request beside the stalled ones: %d %s", code, b)
		}
		wg.Wait()
	}
}

// TestSlowBodySteady: a body that arrives slowly but steadily, each part
// within the body timeout, is not cut.
func TestSlowBodySteady(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"limits": {"body_timeout": "400ms"},
	  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [{"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY"}]}`, up.URL)
	r := start(t, cfg, tollgate.Config{})
	pr, pw := io.Pipe()
	go func() {
		for i, part := range strings.SplitAfter(chatBody, ",") {
			if i > 0 {
				time.Sleep(150 * time.Millisecond)
			}
			io.WriteString(pw, part)
		}
		pw.Close()
	}()
	code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer " + phpToken}, pr)
	if code != 200 {
		t.Errorf("a steady body over %d parts: %d %s", strings.Count(chatBody, ","), code, b)
	}
}

// TestConnsPerClient: one client address holds at most
// max_conns_per_client connections; one more is closed at once, and a
// connection is counted until it closes.
func TestConnsPerClient(t *testing.T) {
	up := newEcho(t)
	cfg := strings.Replace(youtubeConfig(up.URL, `{}`, ""), `"listen"`, `"limits": {"max_conns_per_client": 3}, "listen"`, 1)
	r := start(t, cfg, tollgate.Config{})
	addr := strings.TrimPrefix(r.url, "http://")
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // headers not finished
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, ok := closedWithin(extra, 3*time.Second); !ok {
		t.Error("a fourth connection from one address was served; want it closed")
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if strings.HasPrefix(string(got), "HTTP/1.1 200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one of the three closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
