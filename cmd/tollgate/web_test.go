package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// The operators' page, served by the command itself against a real
// redis-server that Transports spend from.

// syncBuffer is a buffer the command writes to while the test reads it.
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

// startWeb runs `tollgate web` on a free loopback port, with token as
// TOLLGATE_OPERATOR_TOKEN ("" unset), until the test ends; it returns the
// page's URL and what the command writes on stderr.
func startWeb(t *testing.T, e *env, token string, args ...string) (string, *syncBuffer) {
	t.Helper()
	errs := &syncBuffer{}
	getenv := func(k string) string {
		if k == operatorTokenEnv {
			return token
		}
		return ""
	}
	c := &cli{stdout: io.Discard, stderr: errs, getenv: getenv}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- c.run(ctx, append([]string{"web", "-listen", "127.0.0.1:0", "-redis", e.url, "-wait", "2s"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("tollgate web exited %d; it said:\n%s", code, errs)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("tollgate web still running 10s after it was stopped")
		}
	})
	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	for i := 0; i < 500; i++ {
		if m := listening.FindStringSubmatch(errs.String()); m != nil {
			return m[1], errs
		}
		select {
		case code := <-exited:
			t.Fatalf("tollgate web exited %d before listening; it said:\n%s", code, errs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("tollgate web not listening after 5s; it said:\n%s", errs)
	return "", nil
}

// fetch GETs u and returns its status and body.
func fetch(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestWebWrites: pause and resume from the page are refused, with nothing
// changed in Redis, unless the server has an operator token, the request
// is a same-origin POST carrying the page's form token and the operator
// token, and says who and why; then the pause is set and logged with who.
func TestWebWrites(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")
	const token = "op-secret-7f3a"
	readOnly, _ := startWeb(t, e, "")
	writable, log := startWeb(t, e, token)

	_, body := fetch(t, writable+"/")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form token in the writable page:\n%s", body)
	}
	csrf := m[1]
	if _, ro := fetch(t, readOnly+"/"); strings.Contains(ro, `name="csrf"`) || !strings.Contains(ro, "read-only") {
		t.Errorf("the read-only page shows forms or does not say it is read-only:\n%s", ro)
	}

	form := func(change func(url.Values)) url.Values {
		v := url.Values{"csrf": {csrf}, "token": {token}, "by": {"alice"}, "scope": {"project-a"},
			"bucket": {"pool"}, "for": {"10m"}, "reason": {"runaway job"}}
		if change != nil {
			change(v)
		}
		return v
	}
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	paused := func() quota.Paused {
		t.Helper()
		p, err := lim.PauseOf(context.Background(), "project-a", "pool")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	for _, tc := range []struct {
		name   string
		server string // readOnly or writable
		method string
		path   string
		form   url.Values
		header map[string]string
		want   int
		paused bool // after it
	}{
		{"no token configured", readOnly, "POST", "/pause", form(nil), nil, http.StatusForbidden, false},
		{"no token sent", writable, "POST", "/pause", form(func(v url.Values) { v.Del("token") }), nil, http.StatusForbidden, false},
		{"empty token sent", writable, "POST", "/pause", form(func(v url.Values) { v.Set("token", "") }), nil, http.StatusForbidden, false},
		{"wrong token", writable, "POST", "/pause", form(func(v url.Values) { v.Set("token", token+"x") }), nil, http.StatusForbidden, false},
		{"missing form token", writable, "POST", "/pause", form(func(v url.Values) { v.Del("csrf") }), nil, http.StatusForbidden, false},
		{"wrong form token", writable, "POST", "/pause", form(func(v url.Values) { v.Set("csrf", strings.Repeat("0", 64)) }), nil, http.StatusForbidden, false},
		{"cross-site", writable, "POST", "/pause", form(nil), map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, false},
		{"another origin", writable, "POST", "/pause", form(nil), map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, false},
		{"another host (DNS rebinding)", writable, "POST", "/pause", form(nil), map[string]string{"Host": "rebind.example"}, http.StatusMisdirectedRequest, false},
		{"GET to pause", writable, "GET", "/pause?" + form(nil).Encode(), nil, nil, http.StatusMethodNotAllowed, false},
		{"GET to resume", writable, "GET", "/resume", nil, nil, http.StatusMethodNotAllowed, false},
		{"no by", writable, "POST", "/pause", form(func(v url.Values) { v.Del("by") }), nil, http.StatusBadRequest, false},
		{"no reason", writable, "POST", "/pause", form(func(v url.Values) { v.Set("reason", " ") }), nil, http.StatusBadRequest, false},
		{"bad duration", writable, "POST", "/pause", form(func(v url.Values) { v.Set("for", "-5m") }), nil, http.StatusBadRequest, false},
		{"unknown bucket", writable, "POST", "/pause", form(func(v url.Values) { v.Set("bucket", "nope") }), nil, http.StatusBadGateway, false},
		{"right", writable, "POST", "/pause", form(nil), map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther, true},
		{"resume, wrong token", writable, "POST", "/resume", form(func(v url.Values) { v.Set("token", "nope") }), nil, http.StatusForbidden, true},
		{"resume, a reason not plain text", writable, "POST", "/resume", form(func(v url.Values) { v.Set("reason", "a\x1bb") }), nil, http.StatusBadRequest, true},
		{"resume, right", writable, "POST", "/resume", form(nil), nil, http.StatusSeeOther, false},
	} {
		var body io.Reader
		if tc.form != nil {
			body = strings.NewReader(tc.form.Encode())
		}
		req, err := http.NewRequest(tc.method, tc.server+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if tc.form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if h := tc.header["Host"]; h != "" {
			req.Host = h
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d (%q), want %d", tc.name, resp.StatusCode, strings.TrimSpace(string(msg)), tc.want)
		}
		p := paused()
		if got := !p.Until.IsZero(); got != tc.paused {
			t.Errorf("%s: paused in Redis %v (%+v), want %v", tc.name, got, p, tc.paused)
		}
		if tc.paused && p.Reason != "runaway job" {
			t.Errorf("%s: pause reason %q, want %q", tc.name, p.Reason, "runaway job")
		}
		if strings.Contains(string(msg), token) {
			t.Errorf("%s: the answer shows the operator token: %q", tc.name, msg)
		}
	}
	out := log.String()
	for _, want := range []string{`msg="tollgate web: pause" by=alice via="web 127.0.0.1:`, `scope=project-a bucket=pool for=10m0s reason="runaway job"`,
		`msg="tollgate web: resume" by=alice`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q; it is:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `msg="tollgate web: pause"`); n != 1 {
		t.Errorf("%d pauses logged, want 1:\n%s", n, out)
	}
	if strings.Contains(out, token) {
		t.Errorf("the log shows the operator token:\n%s", out)
	}

	// The record of operators' actions has the pause and the resume, by
	// who the form said, from where, and never the token.
	acts, err := ops.New(lim).Actions(context.Background(), 0)
	if err != nil || len(acts) != 2 {
		t.Fatalf("the record of operators' actions: %+v, %v; want the pause and the resume", acts, err)
	}
	res, pau := acts[0], acts[1]
	if pau.What != "pause" || pau.By != "alice" || !strings.HasPrefix(pau.Via, "web 127.0.0.1:") || pau.Scope != "project-a" ||
		pau.Bucket != "pool" || pau.For != 10*time.Minute || pau.Why != "runaway job" || pau.At.IsZero() {
		t.Errorf("the pause recorded: %+v", pau)
	}
	if res.What != "resume" || res.By != "alice" || res.Scope != "project-a" || res.Bucket != "pool" || res.At.Before(pau.At) {
		t.Errorf("the resume recorded: %+v", res)
	}
	raw, err := e.server.Client(t).LRange(context.Background(), quota.DefaultPrefix+"actions", 0, -1).Result()
	if err != nil || strings.Contains(strings.Join(raw, "\n"), token) {
		t.Errorf("the record in Redis shows the operator token (or could not be read: %v)", err)
	}
	// The page shows them.
	if _, page := fetch(t, writable+"/"); !strings.Contains(page, `<section class="record">`) || !strings.Contains(page, "pause bucket pool of project-a for 10m0s") {
		t.Errorf("the page does not show the record of operators' actions:\n%s", page)
	}
}

// TestWebPage: the page shows each scope, bucket and window with its
// numbers, a chart per window and the pauses with their reasons, with
// every name escaped, and weighs less than 200 KB with its assets.
func TestWebPage(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	tr := e.process(t, lim, nil)
	e.spend(t, tr, "project-a", "/v1/items", 30)
	e.spend(t, tr, "project-a", "/v1/search", 2)
	e.spend(t, tr, `<b>"x"&`, "/v1/items", 1) // a hostile scope name
	described(t, lim, "pool", "project-a", `<b>"x"&`)
	described(t, lim, "search", "project-a")
	if code, out, errs := cmd(t, nil, "pause", "-scope", "project-a", "-bucket", "search", "-for", "1h", "-reason", "<script>alert(1)</script>", "-redis", e.url); code != 0 {
		t.Fatalf("pause: exit %d: %s%s", code, out, errs)
	}
	base, _ := startWeb(t, e, "tok")
	code, page := fetch(t, base+"/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	for _, want := range []string{
		`data-scope="project-a"`, `data-bucket="pool"`, `data-bucket="search"`,
		`230 / 9500`, `230 / 399`, `2 / 100`, // 30 lists and 2 searches of 100; 5% kept in reserve
		`500 kept in reserve below the upstream's 10000`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, `&lt;b&gt;&#34;x&#34;&amp;`,
		`<svg class="chart"`, `class="limit"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, `<b>"x"`) {
		t.Errorf("the page shows a name unescaped")
	}
	if n := strings.Count(page, `<svg class="chart"`); n != 5 {
		t.Errorf("%d charts, want 5: a pool of two windows in each scope, a search of one", n)
	}
	// Each chart is drawn over time from the window's log, with the
	// forecast at the current rate (quota/ops.Series, internal/forecast).
	if n := strings.Count(page, `class="run`); n != 5 {
		t.Errorf("%d charts over time, want 5", n)
	}
	// Forecast lines on the days' charts only: a sliding window's chart
	// ends at now, and its forecast is its sentence.
	if n := strings.Count(page, `class="forecast"/>`); n != 3 {
		t.Errorf("%d forecast lines, want 3: the days'", n)
	}
	if !strings.Contains(page, `<span class="forecast risk">at this rate, spent at `) {
		t.Errorf("the page lacks the forecast of the sliding window of project-a's pool, spent before units come back")
	}
	size := len(page)
	for _, a := range []string{"/style.css", "/refresh.js"} {
		code, body := fetch(t, base+a)
		if code != http.StatusOK || body == "" {
			t.Fatalf("GET %s: %d, %d bytes", a, code, len(body))
		}
		size += len(body)
	}
	t.Logf("the page with its assets: %d bytes", size)
	if size >= 200<<10 {
		t.Errorf("the page with its assets weighs %d bytes, want under 200 KB", size)
	}
	if code, _ := fetch(t, base+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %d, want 404", code)
	}
}

// browserEnv, when set, makes a missing chromium a failure.
const browserEnv = "TOLLGATE_REQUIRE_BROWSER"

// screenshotEnv, when set to a file name, keeps the browser test's
// screenshot there (docs/web.png is made so).
const screenshotEnv = "TOLLGATE_WEB_SCREENSHOT"

// chromium runs headless chromium with args for at most a minute, in a
// process group of its own that is killed whole when the time is up.
func chromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}
	c := exec.CommandContext(ctx, bin, append(base, args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	c.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errs bytes.Buffer
	c.Stdout, c.Stderr = &out, &errs
	if err := c.Run(); err != nil {
		t.Fatalf("chromium %s: %v (context: %v)\n%s", strings.Join(args, " "), err, ctx.Err(), errs.String())
	}
	return out.Bytes()
}

// TestWebInBrowser loads the page in headless chromium against
// Transports spending in the test: the DOM it renders shows the scopes,
// buckets and numbers, and a screenshot of it is not blank.
func TestWebInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(browserEnv) != "" {
			t.Fatalf("chromium is not installed and %s is set: %v", browserEnv, err)
		}
		t.Skipf("chromium is not installed (set %s to make this a failure)", browserEnv)
	}
	e := newEnv(t)
	lim := e.limiter(t, nil)
	one := e.process(t, lim, nil)
	e.spend(t, one, "project-a", "/v1/items", 30)
	e.spend(t, one, "project-a", "/v1/search", 2)
	held, err := e.get(one, "project-a", "/v1/search") // a slot in use until its body is closed
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	e.spend(t, e.process(t, lim, nil), "project-b", "/v1/items", 350)
	described(t, lim, "pool", "project-a", "project-b")
	described(t, lim, "search", "project-a")
	if code, out, errs := cmd(t, nil, "pause", "-scope", "project-b", "-for", "2h", "-reason", "over budget", "-by", "ops-alice", "-redis", e.url); code != 0 {
		t.Fatalf("pause: exit %d: %s%s", code, out, errs)
	}
	e.spender(t, "ingest-7@host1", "", map[string]int64{"search.list": 200, "items.list": 30}, time.Now().Add(-42*time.Second))
	e.spender(t, "cron@host2", "php-cron", map[string]int64{"items.list": 3})
	// project-c's sliding window is spent, and two requests wait in it,
	// holding units dated after now.
	started := make(chan struct{}, 4)
	three := e.process(t, lim, func(cfg *tollgate.Config) {
		cfg.Buckets = map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerWindow(10, 100*time.Second)}},
			"search": {Limits: []quota.Limit{quota.PerDay(100, pacific(t))}},
		}
		cfg.Policy = func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{MaxWait: 5 * time.Minute} }
		cfg.Trace.WaitStarted = func(context.Context, tollgate.Decision) { started <- struct{}{} }
	})
	e.spend(t, three, "project-c", "/v1/items", 10)
	wctx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	for range 2 {
		go func() {
			req, _ := http.NewRequestWithContext(wctx, "GET", e.upstream.URL+"/v1/items", nil)
			req.Header.Set("X-Project", "project-c")
			if resp, err := three.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
		<-started
	}
	described(t, lim, "pool", "project-c")
	base, _ := startWeb(t, e, "tok")

	dom := string(chromium(t, bin, "--dump-dom", base+"/"))
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium dumped no page:\n%s", dom)
	}
	for _, want := range []string{
		`data-scope="project-a"`, `data-scope="project-b"`, `data-bucket="pool"`, `data-bucket="search"`,
		`330 / 9500`, `3 / 100`, `350 / 399`, // project-a: 30 lists, 3 searches of 100
		`in flight 1 / 4`, `over budget`, `PAUSED until`, `<svg class="chart"`,
		`<td>ingest-7@host1</td><td>230</td><td>search.list</td>`, `1 request waiting for room, the oldest for 4`, // who spends
		`<td>ops-alice <small>cli</small></td><td>pause scope project-b for 2h0m0s</td>`, // the record of operators' actions
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM lacks %q", want)
		}
	}
	checkCharts(t, dom)
	if t.Failed() {
		t.Logf("the DOM:\n%s", dom)
	}

	shot := filepath.Join(t.TempDir(), "web.png")
	chromium(t, bin, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars", base+"/")
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	bounds := img.Bounds()
	colours := map[[4]uint32]int{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, b, a}]++
		}
	}
	if bounds.Dx() != 1200 || bounds.Dy() != 900 || len(colours) < 50 {
		t.Errorf("screenshot %v with %d colours, want 1200x900 with at least 50", bounds, len(colours))
	}
	t.Logf("screenshot %v, %d bytes, %d colours", bounds, len(b), len(colours))
	if dst := os.Getenv(screenshotEnv); dst != "" {
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var (
	svgChart   = regexp.MustCompile(`(?s)<svg class="chart"[^>]*aria-label="([^"]*)".*?</svg>`)
	nowLine    = regexp.MustCompile(`<line x1="([0-9.]+)"[^>]*class="now"`)
	runLine    = regexp.MustCompile(`<polyline points="([^"]*)" class="run[^"]*"`)
	forecastOf = regexp.MustCompile(`<span class="forecast( risk)?">([^<]*)</span>`)
)

// checkCharts reads the charts as the browser rendered them: no running
// total passes its chart's now marker; no sliding window's chart carries
// a forecast line or label; the forecast's sentence is in the warning
// class exactly when the window is at risk; the title says the prefix once.
func checkCharts(t *testing.T, dom string) {
	t.Helper()
	charts := svgChart.FindAllStringSubmatch(dom, -1)
	if len(charts) == 0 {
		t.Fatal("no chart in the DOM")
	}
	for _, c := range charts {
		name, svg := c[1], c[0]
		if strings.HasPrefix(name, "sliding") && (strings.Contains(svg, `class="forecast"`) || strings.Contains(svg, `class="lbl warn"`)) {
			t.Errorf("the chart of %q carries a forecast line or label:\n%s", name, svg)
		}
		now := nowLine.FindStringSubmatch(svg)
		run := runLine.FindStringSubmatch(svg)
		if now == nil || run == nil {
			continue // a token bucket's bar
		}
		var nowX float64
		fmt.Sscanf(now[1], "%g", &nowX)
		for _, pt := range strings.Fields(run[1]) {
			var x, y float64
			if _, err := fmt.Sscanf(pt, "%g,%g", &x, &y); err != nil {
				t.Fatalf("the chart of %q: a point %q: %v", name, pt, err)
			}
			if x > nowX {
				t.Errorf("the chart of %q draws its running total past now (x %v): %s", name, nowX, run[1])
				break
			}
		}
	}
	forecasts := forecastOf.FindAllStringSubmatch(dom, -1)
	risky := 0
	for _, f := range forecasts {
		atRisk := strings.Contains(f[2], "spent at") || strings.Contains(f[2], "spent already")
		if (f[1] != "") != atRisk {
			t.Errorf("the forecast %q is in the warning class: %v; want %v", f[2], f[1] != "", atRisk)
		}
		if atRisk {
			risky++
		}
	}
	if risky == 0 || risky == len(forecasts) {
		t.Errorf("%d of %d forecasts at risk: the page should show both kinds", risky, len(forecasts))
	}
	if !strings.Contains(dom, "<title>tollgate: quotas under tollgate:</title>") {
		t.Errorf("the page's title does not say the prefix once")
	}
}
