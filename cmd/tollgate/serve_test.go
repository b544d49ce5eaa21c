package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
)

// Secrets the gateway's tests give it.
const (
	serveToken = "tok-serve-test-0123456789"
	serveKey   = "key-serve-test-ABCDEFGHIJ"
)

// serveEnv is the environment of a gateway run by the tests: no
// TOLLGATE_REDIS from outside.
func serveEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "TOKEN=" + serveToken, "KEY=" + serveKey}
}

// TestServeBadConfig: run as a program, a configuration that cannot work
// gets one line on stderr and exit status 2, before listening.
func TestServeBadConfig(t *testing.T) {
	bin := program(t)
	good := `{"name": "yt", "provider": "youtube", "prefix": "/youtube/", "target": "https://youtube.googleapis.com/youtube", "key_env": "KEY"}`
	callers := `"callers": [{"name": "php", "token_env": "TOKEN"}]`
	cases := []struct{ name, config, want string }{
		{"bad JSON", `{"upstreams": [`, "reading the configuration"},
		{"unknown field", `{"listen": "127.0.0.1:0", "upstreams": [` + good + `], "verbose": true}`, `unknown field "verbose"`},
		{"unknown provider", `{"upstreams": [` + strings.Replace(good, `"youtube", "prefix"`, `"myspace", "prefix"`, 1) + `]}`, `unknown provider "myspace"`},
		{"unknown option", `{"upstreams": [` + strings.Replace(good, `"key_env"`, `"options": {"quota": 1, "speed": 2}, "key_env"`, 1) + `]}`, `unknown option "speed"`},
		{"unset token_env", `{"callers": [{"name": "php", "token_env": "NOT_SET"}], "upstreams": [` + good + `]}`, "NOT_SET (token_env) is not set"},
		{"unset key_env", `{` + callers + `, "upstreams": [` + strings.Replace(good, `"KEY"`, `"NO_KEY"`, 1) + `]}`, "NO_KEY (key_env) is not set"},
		{"prefix without slash", `{"upstreams": [` + strings.Replace(good, `"/youtube/"`, `"/youtube"`, 1) + `]}`, `must start and end with "/"`},
		{"bad redis URL", `{"redis": "http://me:pw-secret@x", "upstreams": [` + good + `]}`, "redis"},
		{"zero quota", `{"upstreams": [` + strings.Replace(good, `"key_env"`, `"options": {"quota": 0}, "key_env"`, 1) + `]}`, `serve: upstream "yt": option quota 0: must be positive`},
		{"JSON cut short", "{\n  \"upstreams\": [\n", "line 3, column 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "gateway.json")
			if err := os.WriteFile(file, []byte(c.config), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runServe(t, bin, "serve", "-config", file)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(stderr, c.want) || stdout != "" || strings.Contains(stderr, "listening") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", code, stdout, stderr, c.want)
			}
			for _, secret := range []string{serveToken, serveKey, "pw-secret"} {
				if strings.Contains(stderr, secret) {
					t.Errorf("stderr shows a secret: %q", stderr)
				}
			}
		})
	}
	for _, args := range [][]string{{"serve"}, {"serve", "-config", filepath.Join(t.TempDir(), "missing.json")}, {"serve", "-listen", "x"}} {
		code, _, stderr := runServe(t, bin, args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}

// runServe runs the program to its end, within 30 seconds.
func runServe(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = serveEnv()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not exit within 30s", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestServeSIGTERM: the program, sent SIGTERM, lets the request in flight
// upstream finish, answers the one waiting for its turn 503 with
// Retry-After, and exits 0.
func TestServeSIGTERM(t *testing.T) {
	bin := program(t)
	rs := redistest.Start(t)
	started := make(chan struct{}, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "part2")
	}))
	t.Cleanup(upstream.Close)
	config := fmt.Sprintf(`{"listen": "127.0.0.1:0", "redis": "redis://%s",
	  "callers": [{"name": "php", "token_env": "TOKEN"}],
	  "upstreams": [{"name": "yt", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "KEY",
	    "options": {"quota": 1, "window": "20s", "table": "classic", "reserve_percent": -1},
	    "policy": {"on_refusal": "wait", "max_wait": "30s"}}]}`, rs.Addr, upstream.URL+"/youtube")
	file := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "serve", "-config", file)
	c.Env = serveEnv()
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, "tollgate serve: listening on "); ok {
				addr <- strings.SplitN(rest, ",", 2)[0]
			}
		}
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(30 * time.Second):
		c.Process.Kill()
		t.Fatal("the gateway never said where it listens")
	}

	type result struct {
		code        int
		retry, body string
		err         error
	}
	get := func() result {
		req, _ := http.NewRequest("GET", base+"/youtube/v3/videos?part=id&chart=mostPopular", nil)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return result{resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err}
	}
	var wg sync.WaitGroup
	var inFlight, waiting result
	wg.Go(func() { inFlight = get() })
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first request never reached the upstream")
	}
	wg.Go(func() { waiting = get() })
	time.Sleep(500 * time.Millisecond) // it waits 20s for its turn
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	err = c.Wait()
	<-logged
	if err != nil {
		t.Errorf("the gateway exited with %v, want status 0; it said:\n%s", err, log.String())
	}
	if inFlight.err != nil || inFlight.code != 200 || inFlight.body != "part1part2" {
		t.Errorf("the request in flight: %d %q %v; want 200 part1part2", inFlight.code, inFlight.body, inFlight.err)
	}
	if waiting.err != nil || waiting.code != 503 || waiting.retry == "" {
		t.Errorf("the waiting request: %d Retry-After %q %q %v; want 503 with Retry-After", waiting.code, waiting.retry, waiting.body, waiting.err)
	}
	for _, secret := range []string{serveToken, serveKey} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the gateway's output shows a secret:\n%s", log.String())
		}
	}
}
