package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// TestInFlightPerCaller: a caller with as many requests in flight as the
// bound gets 429 for one more, and another caller is not held back.
func TestInFlightPerCaller(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	cfg := strings.Replace(youtubeConfig(up.URL, `{"table": "classic"}`, ""), `"listen"`, `"limits": {"max_in_flight": 2}, "listen"`, 1)
	r := start(t, cfg, tollgate.Config{})
	list := r.url + "/youtube/v3/videos?part=id"
	php := map[string]string{"Authorization": "Bearer " + phpToken}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { do(t, "GET", list, php, nil) })
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the first requests never arrived")
		}
	}
	code, h, b := do(t, "GET", list, php, nil)
	if code != 429 || h.Get("Retry-After") != "1" || errorBody(t, b).Cause != "caller_in_flight" {
		t.Errorf("a third request in flight: %d Retry-After %q %s; want 429 caller_in_flight", code, h.Get("Retry-After"), b)
	}
	other := make(chan int, 1)
	go func() {
		c, _, _ := do(t, "GET", list, map[string]string{"Authorization": "Bearer " + nodeToken}, nil)
		other <- c
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Error("another caller's request was held back")
	}
	close(release)
	wg.Wait()
	if c := <-other; c != 200 {
		t.Errorf("another caller's request: %d", c)
	}
}

// TestForwardedFor: X-Forwarded-For is set to the client's address,
// appended to, or left out, as configured; hop-by-hop headers never reach
// the upstream.
func TestForwardedFor(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"", "127.0.0.1"},
		{"set", "127.0.0.1"},
		{"append", "192.0.2.1, 127.0.0.1"},
		{"none", ""},
	} {
		t.Run("mode="+c.mode, func(t *testing.T) {
			up := newEcho(t)
			cfg := youtubeConfig(up.URL, `{}`, "")
			if c.mode != "" {
				cfg = strings.Replace(cfg, `"listen"`, fmt.Sprintf(`"forwarded_for": %q, "listen"`, c.mode), 1)
			}
			r := start(t, cfg, tollgate.Config{})
			code, _, b := do(t, "GET", r.url+"/youtube/v3/videos?part=id", map[string]string{
				"Authorization": "Bearer " + phpToken, "X-Forwarded-For": "192.0.2.1",
				"Connection": "X-Hop", "X-Hop": "secret-hop", "Upgrade": "websocket"}, nil)
			if code != 200 {
				t.Fatalf("%d %s", code, b)
			}
			got := up.requests()[0].Header
			if x := strings.Join(got.Values("X-Forwarded-For"), ", "); x != c.want {
				t.Errorf("X-Forwarded-For %q, want %q", x, c.want)
			}
			if got.Get("X-Hop") != "" || got.Get("Upgrade") != "" {
				t.Errorf("hop-by-hop headers reached the upstream: %v", got)
			}
		})
	}
}

// TestHealth: /healthz and /readyz answer without a token; /readyz says
// when Redis does not answer.
func TestHealth(t *testing.T) {
	up := newEcho(t)
	r := start(t, youtubeConfig(up.URL, `{}`, ""), tollgate.Config{})
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _, b := do(t, "GET", r.url+p, nil, nil); code != 200 {
			t.Errorf("%s: %d %s", p, code, b)
		}
	}
	r.srv.Kill()
	if code, _, _ := do(t, "GET", r.url+"/readyz", nil, nil); code != 503 {
		t.Errorf("/readyz with Redis down: %d, want 503", code)
	}
	if code, _, _ := do(t, "GET", r.url+"/healthz", nil, nil); code != 200 {
		t.Errorf("/healthz with Redis down: %d, want 200", code)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

// TestResumableUpload: a YouTube resumable upload through the gateway:
// the session URI points back at the gateway, the chunks stream through
// it (the upstream reads the first before the caller has written the
// second), and the upload is charged once.
func TestResumableUpload(t *testing.T) {
	sim, simURL := newSim(t, ytsim.Config{Quota: 10000, Window: time.Hour})
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [
	    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY", "options": {"table": "classic"}},
	    {"name": "youtube-upload", "provider": "youtube", "prefix": "/upload/", "target": %q, "key_env": "YT_KEY", "options": {"table": "classic"}}]}`,
		simURL+"/youtube", simURL+"/upload")
	var decided decisions
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	bearer := map[string]string{"Authorization": "Bearer " + phpToken, "Content-Type": "application/json"}
	req, _ := http.NewRequest("POST", r.url+"/upload/youtube/v3/videos?uploadType=resumable&part=snippet", strings.NewReader(`{"snippet":{"title":"Holiday"}}`))
	for k, v := range bearer {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != 200 || !strings.HasPrefix(loc, r.url+"/upload/youtube/v3/videos?") || !strings.Contains(loc, "upload_id=") {
		t.Fatalf("opening: %d, Location %q; want a session URI on the gateway", resp.StatusCode, loc)
	}

	const size = 128 << 10
	put, _ := http.NewRequest("PUT", loc, bytes.NewReader(bytes.Repeat([]byte{'v'}, size)))
	put.Header.Set("Authorization", "Bearer "+phpToken)
	got, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if got.StatusCode != 200 || !strings.Contains(string(b), `"youtube#video"`) {
		t.Fatalf("upload: %d %s, want the created video", got.StatusCode, b)
	}
	if st := sim.Stats()["project-1"]; st.Requests != 1 || st.QuotaErrors != 0 {
		t.Errorf("the upstream charged %+v, want one call", st)
	}
	charged := 0
	for _, d := range decided.list() {
		if !d.Free {
			charged++
		}
	}
	if charged != 1 {
		t.Errorf("%d decisions charged units, want 1 (the session's opening): %+v", charged, decided.list())
	}
}

// TestRequestBodyStreamed: a request body reaches the upstream as the
// caller writes it: the upstream has read the first part before the
// caller writes the second.
func TestRequestBodyStreamed(t *testing.T) {
	const part = 32 << 10
	gotFirst := make(chan struct{})
	total := make(chan int, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, part)
		if _, err := io.ReadFull(r.Body, first); err != nil {
			total <- -1
			return
		}
		close(gotFirst)
		rest, _ := io.ReadAll(r.Body)
		total <- part + len(rest)
	}))
	t.Cleanup(up.Close)
	r := start(t, youtubeConfig(up.URL, `{"table": "classic"}`, ""), tollgate.Config{})
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", r.url+"/youtube/v3/videos?part=snippet", pr)
	req.Header.Set("Authorization", "Bearer "+phpToken)
	req.ContentLength = 2 * part
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	pw.Write(bytes.Repeat([]byte{'a'}, part))
	select {
	case <-gotFirst:
	case <-time.After(10 * time.Second):
		pw.CloseWithError(io.ErrUnexpectedEOF)
		t.Fatal("the upstream did not get the first part before the caller wrote the second: the gateway buffers request bodies")
	}
	pw.Write(bytes.Repeat([]byte{'b'}, part))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := <-total; n != 2*part {
		t.Errorf("the upstream read %d bytes, want %d", n, 2*part)
	}
}

// TestNoSecretsInRedis: after requests admitted, refused and paused,
// neither a caller's token nor the upstream's key is in any Redis key or
// value.
func TestNoSecretsInRedis(t *testing.T) {
	sim, simURL := newSim(t, ytsim.Config{Quota: 1000, Window: time.Hour})
	r := start(t, youtubeConfig(simURL, `{"quota": 3, "window": "1m", "table": "classic", "reserve_percent": -1}`, `{"on_refusal": "fail"}`), tollgate.Config{})
	list := r.url + "/youtube/v3/videos?part=id&chart=mostPopular"
	for i := range 5 {
		do(t, "GET", list+"&key="+phpToken, nil, nil)
		do(t, "GET", list, map[string]string{"Authorization": "Bearer " + nodeToken}, nil)
		if i == 0 {
			sim.Inject("videos.list", ytsim.QuotaExceeded)
		}
	}
	ctx := context.Background()
	keys, err := r.rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v: want the quota's keys", keys, err)
	}
	for _, k := range keys {
		var dump string
		switch typ := r.rdb.Type(ctx, k).Val(); typ {
		case "string":
			dump = r.rdb.Get(ctx, k).Val()
		case "hash":
			dump = fmt.Sprint(r.rdb.HGetAll(ctx, k).Val())
		case "zset":
			dump = fmt.Sprint(r.rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "set":
			dump = fmt.Sprint(r.rdb.SMembers(ctx, k).Val())
		case "list":
			dump = fmt.Sprint(r.rdb.LRange(ctx, k, 0, -1).Val())
		case "stream":
			dump = fmt.Sprint(r.rdb.XRange(ctx, k, "-", "+").Val())
		default:
			t.Errorf("key %q of type %q not read", k, typ)
		}
		noSecrets(t, "Redis key "+k, k+" "+dump)
	}
}

// TestAttribution: every decision names the caller whose token the
// request carried (Decision.Caller), the refusals' too.
func TestAttribution(t *testing.T) {
	_, simURL := newSim(t, ytsim.Config{Quota: 1000, Window: time.Hour})
	var decided decisions
	r := start(t, youtubeConfig(simURL, `{"quota": 2, "window": "1m", "table": "classic", "reserve_percent": -1}`, `{"on_refusal": "fail"}`),
		tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	list := r.url + "/youtube/v3/videos?part=id&chart=mostPopular"
	for _, c := range []struct {
		header map[string]string
		query  string
		status int
	}{
		{map[string]string{"Authorization": "Bearer " + phpToken}, "", 200},
		{map[string]string{"X-Goog-Api-Key": nodeToken}, "", 200},
		{nil, "&key=" + phpToken, 429},
	} {
		if code, _, b := do(t, "GET", list+c.query, c.header, nil); code != c.status {
			t.Fatalf("%d %s, want %d", code, b, c.status)
		}
	}
	var got []string
	for _, d := range decided.list() {
		got = append(got, fmt.Sprintf("%s admitted=%v", d.Caller, d.Admitted))
	}
	if want := "php-cron admitted=true, node admitted=true, php-cron admitted=false"; strings.Join(got, ", ") != want {
		t.Errorf("decisions %q, want %q", strings.Join(got, ", "), want)
	}
}

// TestUnreachable: an upstream that cannot be reached is a 502, and the
// line the gateway logs names the upstream, not the URL's query.
func TestUnreachable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	cfg, err := Load([]byte(youtubeConfig(deadURL, `{}`, "")), t.TempDir(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	g, err := Build(cfg, Options{Redis: redistest.Start(t).Client(t), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	req := httptest.NewRequest("GET", "/youtube/v3/videos?part=id&access_token=query-secret&key="+phpToken, nil)
	req.RemoteAddr = "127.0.0.1:9"
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadGateway || errorBody(t, rec.Body.String()).Upstream != "youtube" {
		t.Errorf("%d %s, want 502 naming the upstream", rec.Code, rec.Body.String())
	}
	line := log.String()
	if !strings.Contains(line, "upstream youtube") || strings.Contains(line, "query-secret") {
		t.Errorf("logged %q, want the upstream named and no query", line)
	}
	noSecrets(t, "the log", line)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
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
