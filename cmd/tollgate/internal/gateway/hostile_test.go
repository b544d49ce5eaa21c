package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/quota"
)

// openaiConfig serves an OpenAI-compatible upstream under /openai/ to the
// two callers, with options, refusing at once when there is no room.
func openaiConfig(target, options string) string {
	return fmt.Sprintf(`{
  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
  "upstreams": [{"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q,
    "key_env": "OAI_KEY", "options": %s, "policy": {"on_refusal": "fail"}}]
}`, target, options)
}

const chatBody = `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}`

// TestOpenAIOrganizationFromConfig: the OpenAI-Organization and
// OpenAI-Project a request sends neither choose its quota nor reach the
// upstream; the upstream's options set them.
func TestOpenAIOrganizationFromConfig(t *testing.T) {
	groups := []map[string]string{
		{},
		{"OpenAI-Project": "proj_default"},
		{"OpenAI-Organization": "x"},
		{"OpenAI-Organization": "x", "OpenAI-Project": "proj_default"},
		{"OpenAI-Project": "PROJ_DEFAULT"},
	}
	for _, c := range []struct {
		name, options, org, project string
	}{
		{"none configured", `{"rpm": 3, "reserve_percent": -1}`, "", ""},
		{"configured", `{"rpm": 3, "reserve_percent": -1, "organization": "org-cfg", "project": "proj_cfg"}`, "org-cfg", "proj_cfg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newEcho(t)
			r := start(t, openaiConfig(up.URL, c.options), tollgate.Config{})
			ok := 0
			for _, g := range groups {
				for range 5 {
					h := map[string]string{"Authorization": "Bearer " + phpToken, "Content-Type": "application/json"}
					for k, v := range g {
						h[k] = v
					}
					code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", h, strings.NewReader(chatBody))
					switch code {
					case 200:
						ok++
					case 429:
					default:
						t.Fatalf("%v: %d %s", g, code, b)
					}
				}
			}
			if ok != 3 {
				t.Errorf("%d requests admitted in a minute with rpm 3 (headers chose the quota), want 3", ok)
			}
			for _, req := range up.requests() {
				if o, p := req.Header.Get("OpenAI-Organization"), req.Header.Get("OpenAI-Project"); o != c.org || p != c.project {
					t.Errorf("the upstream got OpenAI-Organization %q, OpenAI-Project %q; want %q %q", o, p, c.org, c.project)
				}
			}
		})
	}
}

// TestUploadIDNotIssued: an upload_id the gateway did not issue makes
// nothing free: the request is charged as what it is, and honours a
// pause; a session the gateway opened still continues for free.
func TestUploadIDNotIssued(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [{"name": "youtube-upload", "provider": "youtube", "prefix": "/upload/", "target": %q, "key_env": "YT_KEY", "options": {"table": "granular"},
	    "policy": {"on_refusal": "fail"}}]}`,
		up.URL+"/upload")
	var decided decisions
	r := start(t, cfg, tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
	php := map[string]string{"Authorization": "Bearer " + phpToken, "Content-Type": "application/json"}
	cases := []struct {
		method, query, endpoint string
	}{
		{"POST", "uploadType=multipart&part=snippet&upload_id=x", "videos.insert"},
		{"POST", "uploadType=resumable&part=snippet&upload_id=forged", "videos.insert"},
		{"POST", "upload_id=x&uploadType=multipart&part=snippet&tollgate_session=00", "videos.insert"},
		{"POST", "uploadType=multipart&part=snippet&UPLOAD_ID=x", "videos.insert"},
	}
	for _, c := range cases {
		n := len(decided.list())
		code, _, b := do(t, c.method, r.url+"/upload/youtube/v3/videos?"+c.query, php, strings.NewReader(`{}`))
		if code != 200 {
			t.Errorf("%s %s: %d %s", c.method, c.query, code, b)
			continue
		}
		got := decided.list()[n:]
		if len(got) != 1 || got[0].Free || got[0].Endpoint != c.endpoint {
			t.Errorf("%s %s: decisions %+v, want one charged %s", c.method, c.query, got, c.endpoint)
		}
	}
	for _, req := range up.requests() {
		if req.URL.Query().Has("tollgate_session") {
			t.Errorf("the upstream got the gateway's own parameter: %q", req.URL.RawQuery)
		}
		if !req.URL.Query().Has("upload_id") && !req.URL.Query().Has("UPLOAD_ID") {
			t.Errorf("the upstream got %q: the caller's upload_id is still sent as it came", req.URL.RawQuery)
		}
	}
	lim, err := quota.New(r.rdb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.PauseBecause(t.Context(), decided.list()[0].Scope, "", time.Minute, "test"); err != nil {
		t.Fatal(err)
	}
	code, _, b := do(t, "POST", r.url+"/upload/youtube/v3/videos?uploadType=multipart&part=snippet&upload_id=x", php, strings.NewReader(`{}`))
	if code != 429 || errorBody(t, b).Cause != "paused_by_operator" {
		t.Errorf("an upload_id the gateway did not issue, while paused: %d %s; want 429 paused_by_operator", code, b)
	}
}

// TestMethodOverrideStripped: the headers that make Google's APIs treat a
// POST as another method never reach the upstream, so a request is
// charged as the method it is sent with.
func TestMethodOverrideStripped(t *testing.T) {
	up := newEcho(t)
	r := start(t, youtubeConfig(up.URL, `{"table": "granular"}`, ""), tollgate.Config{})
	for _, h := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "x-http-method-override"} {
		code, _, b := do(t, "POST", r.url+"/youtube/v3/videos/rate?id=x&rating=like", map[string]string{
			"Authorization": "Bearer " + phpToken, h: "DELETE"}, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", h, code, b)
		}
	}
	for _, req := range up.requests() {
		for _, h := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
			if v := req.Header.Get(h); v != "" {
				t.Errorf("the upstream got %s: %s", h, v)
			}
		}
	}
}

// TestMethodsForwarded: only the methods an upstream's API uses are
// forwarded; the others are answered 405 with Allow, never forwarded.
func TestMethodsForwarded(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [
	    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY"},
	    {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY"},
	    {"name": "anthropic", "provider": "anthropic", "prefix": "/anthropic/", "target": %q, "key_env": "ANT_KEY"},
	    {"name": "github", "provider": "github", "prefix": "/github/", "target": %q, "key_env": "OAI_KEY"}]}`,
		up.URL+"/youtube", up.URL, up.URL, up.URL)
	r := start(t, cfg, tollgate.Config{})
	php := map[string]string{"Authorization": "Bearer " + phpToken}
	cases := []struct {
		method, path string
		forwarded    bool
	}{
		{"TRACE", "/openai/v1/models", false},
		{"PROPFIND", "/openai/v1/models", false},
		{"FOO", "/openai/v1/models", false},
		{"OPTIONS", "/openai/v1/models", false},
		{"TRACE", "/anthropic/v1/models", false},
		{"TRACE", "/github/user", false},
		{"TRACK", "/github/user", false},
		{"TRACE", "/youtube/v3/videos", false},
		{"PATCH", "/youtube/v3/videos", false},
		{"GET", "/openai/v1/models", true},
		{"GET", "/github/user", true},
		{"GET", "/youtube/v3/videos?part=id", true},
	}
	for _, c := range cases {
		n := len(up.requests())
		code, h, b := do(t, c.method, r.url+c.path, php, nil)
		got := len(up.requests()) > n
		if got != c.forwarded {
			t.Errorf("%s %s: forwarded %v, want %v (%d %s)", c.method, c.path, got, c.forwarded, code, b)
		}
		if !c.forwarded && (code != 405 || h.Get("Allow") == "") {
			t.Errorf("%s %s: %d Allow %q, want 405 with Allow", c.method, c.path, code, h.Get("Allow"))
		}
	}
}

// TestUnderscoreHeadersDropped: a header whose name has an underscore
// never reaches the upstream, so it cannot stand in for the key on
// servers that fold "_" into "-".
func TestUnderscoreHeadersDropped(t *testing.T) {
	up := newEcho(t)
	r := start(t, youtubeConfig(up.URL, `{}`, ""), tollgate.Config{})
	code, _, b := do(t, "GET", r.url+"/youtube/v3/videos?part=id", map[string]string{
		"Authorization": "Bearer " + phpToken, "X_Goog_Api_Key": "callers-own", "X_Custom_Key": "x",
		"Authorization_": "Bearer other", "Keep-Me": "1"}, nil)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	got := up.requests()[0].Header
	for k := range got {
		if strings.Contains(k, "_") {
			t.Errorf("the upstream got %s: %q", k, got[k])
		}
	}
	if got.Get("Keep-Me") != "1" || got.Get("X-Goog-Api-Key") != realKey {
		t.Errorf("the upstream got %v; want Keep-Me and the real key kept", got)
	}
}

// TestNoCallersRefusesTheWeb: without callers, a request naming a Host
// that is not the gateway's (DNS rebinding), or sent by a page of
// another origin, is refused and never forwarded.
func TestNoCallersRefusesTheWeb(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"upstreams": [{"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY"}]}`, up.URL+"/youtube")
	r := start(t, cfg, tollgate.Config{})
	port := r.url[strings.LastIndex(r.url, ":")+1:]
	cases := []struct {
		host   string
		header map[string]string
		want   int
	}{
		{"attacker.example:" + port, nil, 421},
		{"attacker.example", nil, 421},
		{"", map[string]string{"Origin": "https://evil.example"}, 403},
		{"", map[string]string{"Origin": "null"}, 403},
		{"", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"", nil, 200},
		{"localhost:" + port, nil, 200},
		{"", map[string]string{"Origin": r.url, "Sec-Fetch-Site": "same-origin"}, 200},
		{"", map[string]string{"Sec-Fetch-Site": "none"}, 200},
	}
	for _, c := range cases {
		n := len(up.requests())
		req, _ := http.NewRequest("POST", r.url+"/youtube/v3/videos/rate?id=x&rating=like", nil)
		if c.host != "" {
			req.Host = c.host
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		forwarded := len(up.requests()) > n
		if resp.StatusCode != c.want || forwarded != (c.want == 200) {
			t.Errorf("Host %q %v: %d, forwarded %v; want %d", c.host, c.header, resp.StatusCode, forwarded, c.want)
		}
	}
}

// TestLogQuoted: what a request sends is quoted in the gateway's log: a
// newline in its path cannot write a line of its own.
func TestLogQuoted(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	cfg, err := Load([]byte(openaiConfig(deadURL, `{}`)), t.TempDir(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{
		"/openai/v1/chat%0atollgate%20serve:%20forged",
		"/openai/v1/chat%0d%0aforged",
		"/openai/v1/chat%1b[31mred",
	} {
		var log syncBuffer
		g, err := Build(cfg, Options{Redis: redistest.Start(t).Client(t), Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", target, strings.NewReader(chatBody))
		req.RemoteAddr = "127.0.0.1:9"
		req.Header.Set("Authorization", "Bearer "+phpToken)
		g.ServeHTTP(httptest.NewRecorder(), req)
		g.Close()
		line := log.String()
		if strings.Count(line, "\n") != 1 || strings.ContainsAny(strings.TrimSuffix(line, "\n"), "\r\x1b") {
			t.Errorf("%s: logged %q, want one line, control characters quoted", target, line)
		}
	}
}

// TestLocationNotFromHost: a rewritten Location points at the address the
// gateway was reached at, or its public_url, never at the Host a request
// names.
func TestLocationNotFromHost(t *testing.T) {
	for _, c := range []struct{ public, want string }{
		{"", ""}, // the gateway's own address
		{"https://gw.example/base", "https://gw.example/base/upload/youtube/v3/videos?"},
	} {
		_, simURL := newSim(t, ytsim.Config{Quota: 10000, Window: time.Hour})
		pub := ""
		if c.public != "" {
			pub = fmt.Sprintf(`"public_url": %q,`, c.public)
		}
		cfg := fmt.Sprintf(`{%s "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
		  "upstreams": [{"name": "youtube-upload", "provider": "youtube", "prefix": "/upload/", "target": %q, "key_env": "YT_KEY", "options": {"table": "classic"}}]}`,
			pub, simURL+"/upload")
		r := start(t, cfg, tollgate.Config{})
		want := c.want
		if want == "" {
			want = r.url + "/upload/youtube/v3/videos?"
		}
		req, _ := http.NewRequest("POST", r.url+"/upload/youtube/v3/videos?uploadType=resumable&part=snippet", strings.NewReader(`{"snippet":{"title":"x"}}`))
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer "+phpToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != 200 || !strings.HasPrefix(loc, want) {
			t.Errorf("public_url %q: %d, Location %q; want it under %q", c.public, resp.StatusCode, loc, want)
		}
	}
}

// TestForwardedForThirdParty: by default a third-party target (a host
// name, a public address) gets no X-Forwarded-For, so the client's
// internal address stays inside; a local one still gets the client's
// address; "set" and "append" still apply when asked.
func TestForwardedForThirdParty(t *testing.T) {
	for _, c := range []struct{ target, mode, want string }{
		{"https://api.openai.com", "", ""},
		{"https://203.0.113.9", "", ""},
		{"http://10.0.0.7:8000", "", "127.0.0.1"},
		{"http://localhost:8000", "", "127.0.0.1"},
		{"https://api.openai.com", "set", "127.0.0.1"},
		{"https://api.openai.com", "append", "192.0.2.1, 127.0.0.1"},
	} {
		cfg := openaiConfig(c.target, `{}`)
		if c.mode != "" {
			cfg = strings.Replace(cfg, `"callers"`, fmt.Sprintf(`"forwarded_for": %q, "callers"`, c.mode), 1)
		}
		loaded, err := Load([]byte(cfg), t.TempDir(), getenv)
		if err != nil {
			t.Fatal(err)
		}
		var seen http.Header
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			seen = req.Header.Clone()
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		})
		g, err := Build(loaded, Options{Redis: redistest.Start(t).Client(t), Base: base})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/openai/v1/models", nil)
		req.RemoteAddr = "127.0.0.1:9"
		req.Header.Set("Authorization", "Bearer "+phpToken)
		req.Header.Set("X-Forwarded-For", "192.0.2.1")
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		g.Close()
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", c.target, rec.Code, rec.Body)
		}
		if got := strings.Join(seen.Values("X-Forwarded-For"), ", "); got != c.want {
			t.Errorf("target %s, forwarded_for %q: X-Forwarded-For %q, want %q", c.target, c.mode, got, c.want)
		}
	}
}

// roundTripFunc is a RoundTripper of a func.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestWhatHeld: what the gateway already refused before it was hardened
// stays refused: headers past max_header_bytes are 431, a request with
// both Transfer-Encoding and Content-Length cannot smuggle a second
// request to the upstream, and an unauthenticated one never reaches it.
func TestWhatHeld(t *testing.T) {
	up := newEcho(t)
	cfg := strings.Replace(youtubeConfig(up.URL, `{}`, ""), `"listen"`, `"limits": {"max_header_bytes": 4096}, "listen"`, 1)
	r := start(t, cfg, tollgate.Config{})
	addr := strings.TrimPrefix(r.url, "http://")
	auth := "Authorization: Bearer " + phpToken + "\r\n"
	cases := []struct {
		name, raw string
		want      int
	}{
		{"oversized headers", "GET /youtube/v3/videos?part=id HTTP/1.1\r\nHost: x\r\n" + auth + "X-Big: " + strings.Repeat("a", 8192) + "\r\n\r\n", 431},
		{"Transfer-Encoding and Content-Length", "POST /youtube/v3/videos/rate?id=x&rating=like HTTP/1.1\r\nHost: x\r\n" + auth +
			"Content-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /youtube/v3/smuggled HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"no token", "POST /youtube/v3/videos/rate?id=x&rating=like HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 401},
		{"the upstream's key", "GET /youtube/v3/videos?part=id HTTP/1.1\r\nHost: x\r\nX-Goog-Api-Key: " + realKey + "\r\n\r\n", 401},
	}
	for _, c := range cases {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, c.raw)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		resp.Body.Close()
		conn.Close()
		if c.want != 0 && resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	for _, req := range up.requests() {
		if strings.Contains(req.URL.Path, "smuggled") || req.Header.Get("X-Goog-Api-Key") != realKey {
			t.Errorf("the upstream got %s %s with key %q", req.Method, req.URL.Path, req.Header.Get("X-Goog-Api-Key"))
		}
	}
}
