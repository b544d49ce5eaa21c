package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

	"github.com/tollgate/tollgate/internal/oaisim"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
)

// What the test needs beyond Go, and how it is told where they are.
const (
	// requireEnv, when set to anything, makes missing php, node or the
	// openai package a failure instead of a skip (.ci/run sets it).
	requireEnv = "TOLLGATE_REQUIRE_POLYGLOT"
	// npmEnv names the directory the openai npm package was installed
	// into (npm install --prefix DIR openai@6).
	npmEnv = "TOLLGATE_OPENAI_NODE"
)

// The YouTube quota the PHP cron and the Go process share: 600 units per
// 10 s, of which the provider's reserve leaves 570 to spend. Each worker
// alone asks 9 passes of 8 videos.list (1 unit) and 3 search.list (100
// units): 372 units, under the limit; together 744, over it. So the
// window holding more than 372 shows that both spent the one quota, and
// the upstream refusing nothing shows that they never spent past it.
const (
	ytQuota  = 600
	ytWindow = 10 * time.Second
	ytLimit  = 570 // ytQuota less the provider's default reserve, 5%
	passes   = 9
	// admitLag is how much later than its admission a call may reach the
	// upstream: any window of ytWindow-admitLag at the upstream then holds
	// calls admitted within ytWindow.
	admitLag = time.Second
)

// The simulated OpenAI limits: 10 requests per minute, a minute lasting
// 2 s; the Node worker's 24 calls take some five minutes of those.
const (
	oaiMinute = 2 * time.Second
	oaiRPM    = 10
	nodeCalls = 24
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		if err := runWorker(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "go worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tools finds php (with its curl extension), node and the openai npm
// package's node_modules, or skips the test (fails it, with requireEnv).
func tools(t *testing.T) (php, node, nodeModules string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("%s, and %s is set", msg, requireEnv)
		}
		t.Skipf("%s (set %s to make this a failure)", msg, requireEnv)
	}
	php, err := exec.LookPath("php")
	if err != nil {
		missing("php is not installed")
	}
	if out, err := exec.Command(php, "-r", `exit(extension_loaded("curl") ? 0 : 1);`).CombinedOutput(); err != nil {
		missing("php has no curl extension: %v %s", err, out)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	dir := os.Getenv(npmEnv)
	if dir == "" {
		missing("%s names no directory holding the openai npm package", npmEnv)
	}
	nodeModules = filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(nodeModules, "openai", "package.json")); err != nil {
		missing("the openai npm package is not in %s: %v", dir, err)
	}
	return php, node, nodeModules
}

// upstream is a simulator behind a counter of every request that reaches
// it, which also notes any request that carries a caller's token, or not
// the credential the upstream should get.
type upstream struct {
	sim    http.Handler
	tokens []string                   // the callers' tokens, never to arrive
	check  func(*http.Request) string // what is wrong with the credential, or ""

	mu       sync.Mutex
	requests int
	problems []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.requests++
	if p := u.check(r); p != "" {
		u.problems = append(u.problems, r.Method+" "+r.URL.Path+": "+p)
	}
	for _, tok := range u.tokens {
		if strings.Contains(r.URL.RawQuery, tok) {
			u.problems = append(u.problems, r.Method+" "+r.URL.Path+": a caller's token in the query")
		}
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, tok) {
					u.problems = append(u.problems, r.Method+" "+r.URL.Path+": a caller's token in "+name)
				}
			}
		}
	}
	u.mu.Unlock()
	u.sim.ServeHTTP(w, r)
}

// count returns the requests that reached the upstream so far, and what
// was wrong with them.
func (u *upstream) count() (int, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests, append([]string(nil), u.problems...)
}

// secret returns a random string for a token or key, prefixed by what it
// is.
func secret(what string) string { return what + "-" + rand.Text() }

// buildTollgate builds the tollgate command from the main module into the
// test's temporary directory.
func buildTollgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tollgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tollgate")
	cmd.Dir = redistest.ModuleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the tollgate command: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback address nobody listens on, for the gateway.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gateway is a running `tollgate serve`.
type gateway struct {
	url    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	out    *syncBuffer // stdout and stderr
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// startGateway writes config into a file, runs `tollgate serve -config`
// with env, and waits until /healthz answers 200.
func startGateway(t *testing.T, bin string, config map[string]any, env []string) *gateway {
	t.Helper()
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gateway{url: "http://" + config["listen"].(string), out: &syncBuffer{}, exited: make(chan struct{})}
	g.cmd = exec.Command(bin, "serve", "-config", file)
	g.cmd.Env = append(os.Environ(), env...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		g.err = g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Kill()
			<-g.exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-g.exited:
			t.Fatalf("tollgate serve exited before it was ready (%v):\n%s\nconfig:\n%s", g.err, g.out, b)
		default:
		}
		resp, err := http.Get(g.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate serve: /healthz not 200 after 30s (last: %v):\n%s", err, g.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and returns the process's exit, or an error when it
// is still running after d.
func (g *gateway) stop(d time.Duration) error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
		return g.err
	case <-time.After(d):
		return fmt.Errorf("still running %v after SIGTERM", d)
	}
}

// refusal is a request the gateway must answer itself.
type refusal struct {
	name   string
	method string
	path   string // request target, as sent on the wire
	header map[string]string
	body   string
	want   func(status int) bool
	wants  string // want, in words
}

// send writes one request on a fresh connection, exactly as given (so
// that an absolute URI goes as it is), and returns the status answered.
func send(addr string, r refusal) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", r.method, r.path, addr)
	for k, v := range r.header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	if r.body != "" {
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(r.body))
	}
	req.WriteString("\r\n" + r.body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// runScript runs a worker script and decodes the report it prints.
func runScript(name string, cmd *exec.Cmd) (report, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var r report
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("%s: %v\nstdout: %s\nstderr: %s", name, err, stdout.Bytes(), stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("%s printed %q (stderr %q): %v", name, stdout.Bytes(), stderr.Bytes(), err)
	}
	return r, nil
}

// counted is what tollgate's own count of the shared YouTube pool showed
// while the workers ran.
type counted struct {
	limit   int64 // the limit enforced, e.g. 570
	window  time.Duration
	most    int64 // the most units counted in the window at once
	held    int64 // the most units held, waiting their turn, at once
	samples int
	err     error
}

// watch reads, every 50ms until ctx is done, how much of the YouTube pool
// the Transport tr counts in Redis.
func watch(ctx context.Context, tr *youtube.Transport) counted {
	var c counted
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		usage, err := tr.Usage(ctx, youtube.DefaultProject, youtube.Pool)
		if err != nil {
			if ctx.Err() == nil && c.err == nil {
				c.err = err
			}
		} else if len(usage) > 0 {
			u := usage[0]
			c.samples++
			c.limit, c.window = u.Limit.Units, u.Limit.Window
			c.most = max(c.most, u.Used-u.Held)
			c.held = max(c.held, u.Held)
		}
		select {
		case <-ctx.Done():
			return c
		case <-tick.C:
		}
	}
}

// mostFixed returns the most units that arrived in one of the simulated
// YouTube's windows: fixed ones of length w from the Unix epoch.
func mostFixed(calls []windowcheck.Call, w time.Duration) int64 {
	sums := map[int64]int64{}
	var most int64
	for _, c := range calls {
		k := c.At.UnixNano() / int64(w)
		sums[k] += c.Units
		most = max(most, sums[k])
	}
	return most
}

// TestPolyglot: a PHP cron job and a Node service on OpenAI's SDK reach
// the simulated YouTube and OpenAI through `tollgate serve` with their
// caller tokens, while a Go process on providers/youtube spends the same
// YouTube key straight from the simulator, on the same Redis. Required:
// every call answered; the upstreams refuse nothing (no 403
// quotaExceeded, no 429); no window at the upstream over the limit less
// the reserve (allowing admitLag); tollgate's count of the pool above
// what either worker spent alone (they shared it); every stream read to
// its end; the callers' tokens never reach an upstream;
// requests without a token, with the upstream's own key, to no prefix or
// as an absolute URI never reach one; SIGTERM stops the gateway with exit
// status 0, and its output shows no token or key.
func TestPolyglot(t *testing.T) {
	php, node, nodeModules := tools(t)
	phpScript, err := filepath.Abs(filepath.Join("testdata", "cron.php"))
	if err != nil {
		t.Fatal(err)
	}
	nodeScript, err := filepath.Abs(filepath.Join("testdata", "openai_worker.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildTollgate(t)
	rdb := redistest.Start(t)

	phpToken, nodeToken := secret("tok-php"), secret("tok-node")
	ytKey, oaiKey := secret("AIza-polyglot"), secret("sk-polyglot")
	tokens := []string{phpToken, nodeToken}

	ytSim := ytsim.New(ytsim.Config{Quota: ytQuota, Window: ytWindow})
	ytUp := &upstream{sim: ytSim, tokens: tokens, check: func(r *http.Request) string {
		if got := r.Header.Get("X-Goog-Api-Key"); got != ytKey {
			return "X-Goog-Api-Key is not the upstream's key"
		}
		if r.URL.Query().Has("key") {
			return "a key in the URL"
		}
		return ""
	}}
	ytAPI := httptest.NewServer(ytUp)
	t.Cleanup(ytAPI.Close)

	oaiSim := oaisim.New(oaisim.Config{Minute: oaiMinute, Limits: oaisim.Limits{RPM: oaiRPM}})
	oaiUp := &upstream{sim: oaiSim, tokens: tokens, check: func(r *http.Request) string {
		if r.Header.Get("Authorization") != "Bearer "+oaiKey {
			return "Authorization is not the upstream's key"
		}
		return ""
	}}
	oaiAPI := httptest.NewServer(oaiUp)
	t.Cleanup(oaiAPI.Close)

	// The configuration, aimed at the simulators.
	config := map[string]any{
		"listen": freeAddr(t),
		"redis":  "redis://" + rdb.Addr + "/0",
		"callers": []map[string]any{
			{"name": "php-cron", "token_env": "TOLLGATE_TOKEN_PHP"},
			{"name": "node-svc", "token_env": "TOLLGATE_TOKEN_NODE"},
		},
		"upstreams": []map[string]any{
			{"name": "youtube", "provider": "youtube", "prefix": "/youtube/",
				"target": ytAPI.URL + "/youtube", "key_env": "YOUTUBE_API_KEY",
				"options": map[string]any{"quota": ytQuota, "window": ytWindow.String(), "table": "classic"}},
			{"name": "openai", "provider": "openai", "prefix": "/openai/",
				"target": oaiAPI.URL, "key_env": "OPENAI_API_KEY",
				"options": map[string]any{"minute": oaiMinute.String()}},
		},
	}
	gw := startGateway(t, bin, config, []string{
		"TOLLGATE_TOKEN_PHP=" + phpToken, "TOLLGATE_TOKEN_NODE=" + nodeToken,
		"YOUTUBE_API_KEY=" + ytKey, "OPENAI_API_KEY=" + oaiKey,
	})
	addr := strings.TrimPrefix(gw.url, "http://")

	// What the gateway answers itself: nothing reaches an upstream.
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	is := func(code int) func(int) bool { return func(s int) bool { return s == code } }
	clientError := func(s int) bool { return s >= 400 && s < 500 }
	refusals := []refusal{
		{name: "youtube, no token", method: "GET", path: "/youtube/v3/videos?part=id&chart=mostPopular",
			want: is(401), wants: "401"},
		{name: "youtube, the upstream's own key", method: "GET", path: "/youtube/v3/videos?part=id&chart=mostPopular",
			header: map[string]string{"X-Goog-Api-Key": ytKey}, want: is(401), wants: "401"},
		{name: "youtube, an unknown token in key=", method: "GET", path: "/youtube/v3/videos?part=id&chart=mostPopular&key=" + secret("tok-unknown"),
			want: is(401), wants: "401"},
		{name: "openai, no token", method: "POST", path: "/openai/v1/chat/completions", body: chat,
			want: is(401), wants: "401"},
		{name: "unknown prefix", method: "GET", path: "/nowhere/v3/videos?part=id&chart=mostPopular",
			header: map[string]string{"X-Goog-Api-Key": phpToken}, want: is(404), wants: "404"},
		{name: "the root", method: "GET", path: "/",
			header: map[string]string{"Authorization": "Bearer " + nodeToken}, want: is(404), wants: "404"},
		{name: "an absolute URI", method: "GET", path: ytAPI.URL + "/youtube/v3/videos?part=id&chart=mostPopular",
			header: map[string]string{"X-Goog-Api-Key": phpToken}, want: clientError, wants: "a 4xx"},
	}
	ytBefore, _ := ytUp.count()
	oaiBefore, _ := oaiUp.count()
	var answered []string
	for _, r := range refusals {
		status, err := send(addr, r)
		switch {
		case err != nil:
			t.Errorf("%s: %v", r.name, err)
		case !r.want(status):
			t.Errorf("%s: %s %s answered %d, want %s", r.name, r.method, r.path, status, r.wants)
		}
		answered = append(answered, fmt.Sprintf("%s %d", r.name, status))
	}
	ytAfter, _ := ytUp.count()
	oaiAfter, _ := oaiUp.count()
	if ytAfter != ytBefore || oaiAfter != oaiBefore {
		t.Errorf("refused requests reached the upstreams: YouTube %d requests (want %d), OpenAI %d (want %d)",
			ytAfter, ytBefore, oaiAfter, oaiBefore)
	}
	t.Logf("answered by the gateway alone: %s; upstream requests meanwhile: %d", strings.Join(answered, ", "),
		ytAfter-ytBefore+oaiAfter-oaiBefore)

	// tollgate's count of the shared pool, as a Go program reads it.
	sampler, err := youtube.NewTransport([]string{ytKey}, rdb.Client(t), youtubeOptions(ytAPI.URL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sampler.Close() })

	// The three workers, at once.
	start := time.Now().Add(500 * time.Millisecond) // the Go process's time to boot
	goCfg, _ := json.Marshal(workerConfig{Redis: rdb.Addr, API: ytAPI.URL, Key: ytKey, Passes: passes, Start: start})
	goCmd := exec.Command(os.Args[0], "-test.run=^$")
	goCmd.Env = append(os.Environ(), workerEnv+"="+string(goCfg))
	phpCmd := exec.Command(php, phpScript)
	phpCmd.Env = append(os.Environ(), "GATEWAY="+gw.url, "TOLLGATE_TOKEN="+phpToken, fmt.Sprintf("PASSES=%d", passes))
	nodeCmd := exec.Command(node, nodeScript)
	nodeCmd.Env = append(os.Environ(), "GATEWAY="+gw.url, "TOLLGATE_TOKEN="+nodeToken,
		fmt.Sprintf("CALLS=%d", nodeCalls), "NODE_PATH="+nodeModules)

	ctx, stopWatching := context.WithCancel(context.Background())
	watched := make(chan counted, 1)
	go func() { watched <- watch(ctx, sampler) }()
	var wg sync.WaitGroup
	var goRep, phpRep, nodeRep report
	var goErr, phpErr, nodeErr error
	began := time.Now()
	wg.Go(func() { goRep, goErr = runScript("the Go process", goCmd) })
	wg.Go(func() {
		time.Sleep(time.Until(start))
		phpRep, phpErr = runScript("the PHP cron", phpCmd)
	})
	wg.Go(func() {
		time.Sleep(time.Until(start))
		nodeRep, nodeErr = runScript("the Node worker", nodeCmd)
	})
	wg.Wait()
	took := time.Since(began)
	stopWatching()
	count := <-watched
	for _, err := range []error{goErr, phpErr, nodeErr} {
		if err != nil {
			t.Error(err)
		}
	}

	// Stopped with SIGTERM, the gateway exits 0 (nothing is in flight).
	if err := gw.stop(15 * time.Second); err != nil {
		t.Errorf("tollgate serve after SIGTERM: %v\n%s", err, gw.out)
	}
	for _, s := range []string{phpToken, nodeToken, ytKey, oaiKey} {
		if strings.Contains(gw.out.String(), s) {
			t.Errorf("the gateway's output shows a token or key (%s...)", s[:8])
		}
	}
	if t.Failed() {
		t.Logf("the gateway's output:\n%s", gw.out)
	}

	// The figures.
	ytStats := ytSim.Stats()[ytKey]
	var ytCalls []windowcheck.Call
	for _, a := range ytSim.Arrivals() {
		if a.Project == ytKey && a.Bucket == ytsim.Pool && a.Units > 0 {
			ytCalls = append(ytCalls, windowcheck.Call{At: a.At, Units: a.Units})
		}
	}
	mostUpstream := mostFixed(ytCalls, ytWindow)
	mostLimit, _ := windowcheck.Most(ytCalls, ytWindow-admitLag)
	var oaiRequests []windowcheck.Call
	var oai429, oaiStreams int
	for _, a := range oaiSim.Arrivals() {
		oaiRequests = append(oaiRequests, windowcheck.Call{At: a.At, Units: 1})
		if a.Status != http.StatusOK {
			oai429++
			t.Errorf("the OpenAI upstream answered %d %s at %v", a.Status, a.Code, a.At.Format(time.StampMilli))
		}
		if a.Stream {
			oaiStreams++
		}
	}
	mostOAI, _ := windowcheck.Most(oaiRequests, oaiMinute)
	ytReached, ytProblems := ytUp.count()
	oaiReached, oaiProblems := oaiUp.count()

	t.Logf("workers ran %v", took.Round(time.Millisecond))
	t.Logf("php cron via the gateway: %d requests (%d videos.list, %d search.list), %d units; answers %v",
		phpRep.Requests, phpRep.Videos, phpRep.Searches, phpRep.units(), phpRep.Status)
	t.Logf("go process via providers/youtube: %d requests (%d videos.list, %d search.list), %d units; answers %v",
		goRep.Requests, goRep.Videos, goRep.Searches, goRep.units(), goRep.Status)
	t.Logf("node openai@6 via the gateway: %d calls, %d streamed, %d streams complete; answers %v",
		nodeRep.Requests, nodeRep.Streamed, nodeRep.StreamsCompleted, nodeRep.Status)
	t.Logf("youtube upstream: %d requests, %d units, %d quota errors; most units in one of its %v windows: %d of the quota %d; in any %v: %d of the limit %d",
		ytStats.Requests, ytStats.Units, ytStats.QuotaErrors, ytWindow, mostUpstream, ytQuota, ytWindow-admitLag, mostLimit, ytLimit)
	t.Logf("tollgate's count of the pool (%d reads): at most %d units of its limit %d per %v, %d more held waiting their turn",
		count.samples, count.most, count.limit, count.window, count.held)
	t.Logf("openai upstream: %d requests (%d streamed), %d refused; most requests in any minute (%v): %d of %d RPM",
		len(oaiRequests), oaiStreams, oai429, oaiMinute, mostOAI, oaiRPM)
	t.Logf("429s from the gateway: php %d, node %d", phpRep.Status["429"], nodeRep.Status["429"])

	// Every call answered, by every worker.
	wantPHP := passes*len(regions) + (passes+2)/3
	for _, w := range []struct {
		name string
		r    report
		want int
	}{{"the PHP cron", phpRep, wantPHP}, {"the Go process", goRep, wantPHP}, {"the Node worker", nodeRep, nodeCalls}} {
		if w.r.Requests != w.want || w.r.OK != w.want {
			t.Errorf("%s: %d of %d requests answered, want all %d; first errors: %q", w.name, w.r.OK, w.r.Requests, w.want, w.r.Errors)
		}
	}
	if want := nodeCalls / 4; nodeRep.Streamed != want || nodeRep.StreamsCompleted != want || oaiStreams != want {
		t.Errorf("streams: %d sent, %d complete, %d at the upstream; want %d of each", nodeRep.Streamed, nodeRep.StreamsCompleted, oaiStreams, want)
	}
	// The upstreams refused nothing, and each call reached them once.
	if ytStats.QuotaErrors != 0 {
		t.Errorf("the YouTube upstream answered %d quota errors, want 0", ytStats.QuotaErrors)
	}
	if want := int64(phpRep.Requests + goRep.Requests); ytStats.Requests != want {
		t.Errorf("the YouTube upstream metered %d requests; the workers sent %d", ytStats.Requests, want)
	}
	if ytReached != int(ytStats.Requests) || oaiReached != len(oaiRequests) {
		t.Errorf("requests reaching the simulators: YouTube %d (%d metered), OpenAI %d (%d metered)",
			ytReached, ytStats.Requests, oaiReached, len(oaiRequests))
	}
	// No window over the limit less the reserve. (The upstream's own
	// windows, fixed ones, are kept under the quota by the simulator,
	// which would have refused the call: see the quota errors above.)
	if mostLimit > ytLimit {
		t.Errorf("YouTube: %d units arrived within %v, over the limit %d", mostLimit, ytWindow-admitLag, ytLimit)
	}
	if mostOAI > oaiRPM {
		t.Errorf("OpenAI: %d requests in a minute, over the %d RPM", mostOAI, oaiRPM)
	}
	// One quota, shared: tollgate enforced 570 per 10 s in the Go
	// program's scope, and counted there more than either worker spent.
	if count.err != nil {
		t.Errorf("reading tollgate's count: %v", count.err)
	}
	if count.limit != ytLimit || count.window < ytWindow {
		t.Errorf("tollgate enforces %d units per %v, want %d per %v", count.limit, count.window, ytLimit, ytWindow)
	}
	if alone := max(phpRep.units(), goRep.units()); count.most <= alone || count.most > ytLimit {
		t.Errorf("tollgate counted at most %d units in the pool's window; want more than either worker spent (%d) and at most %d",
			count.most, alone, ytLimit)
	}
	for _, p := range append(ytProblems, oaiProblems...) {
		t.Errorf("at the upstream: %s", p)
	}
}
