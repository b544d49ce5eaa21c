package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota/embedded"
)

// testRouter routes the prefixes of the example, and a longer one.
func testRouter(t testing.TB) *router {
	t.Helper()
	var routes []route
	for _, r := range []struct{ prefix, target, name string }{
		{"/youtube/", "https://youtube.googleapis.com/youtube", "youtube"},
		{"/openai/", "https://api.openai.com", "openai"},
		{"/openai/azure/", "https://example.openai.azure.com/openai/", "azure"},
		{"/", "https://fallback.example/base", "fallback-never-for-dots"},
	} {
		u, err := url.Parse(r.target)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, route{prefix: r.prefix, target: u, up: &upstream{cfg: &Upstream{Name: r.name, target: u}}})
	}
	return newRouter(routes)
}

// TestRoute: longest prefix, prefix removed, the rest joined to the
// target's path by exactly one "/", escapes kept, dot segments refused.
func TestRoute(t *testing.T) {
	rt := testRouter(t)
	cases := []struct {
		path     string // escaped, as a request carries it
		upstream string
		out      string // escaped
		err      error
	}{
		{"/youtube/v3/videos", "youtube", "/youtube/v3/videos", nil},
		{"/youtube/", "youtube", "/youtube/", nil},
		{"/youtube//v3/videos", "youtube", "/youtube/v3/videos", nil},
		{"/openai/v1/chat/completions", "openai", "/v1/chat/completions", nil},
		{"/openai/azure/deployments/gpt/chat", "azure", "/openai/deployments/gpt/chat", nil},
		{"/openai/azurex/v1", "openai", "/azurex/v1", nil},
		{"/github/repos/o/r/branches/feature%2Fx", "fallback-never-for-dots", "/base/github/repos/o/r/branches/feature%2Fx", nil},
		{"/youtube/v3/a%20b", "youtube", "/youtube/v3/a%20b", nil},
		{"/youtube/v3/../../openai/v1", "", "", errBadPath},
		{"/youtube/v3/%2e%2e/x", "", "", errBadPath},
		{"/youtube/v3/%2E./x", "", "", errBadPath},
		{"/youtube/./v3", "", "", errBadPath},
		{"/youtube/v3/..%2F..%2Fadmin", "", "", errBadPath},
		{"/youtube/v3/..%5Cadmin", "", "", errBadPath},
		{"/youtube/v3/..", "", "", errBadPath},
		{"/youtube/v3/%zz", "", "", errBadPath},
		{"youtube/v3", "", "", errBadPath},
		{"/youtube/v3/...", "youtube", "/youtube/v3/...", nil},
	}
	for _, c := range cases {
		r, out, plain, err := rt.match(c.path)
		if err != c.err {
			t.Errorf("%s: error %v, want %v", c.path, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if r.up.cfg.Name != c.upstream || out != c.out {
			t.Errorf("%s: %s %s, want %s %s", c.path, r.up.cfg.Name, out, c.upstream, c.out)
		}
		if p, _ := url.PathUnescape(out); p != plain {
			t.Errorf("%s: plain path %q, want %q", c.path, plain, p)
		}
	}
	noPrefix := newRouter(testRouter(t).routes[:3])
	if _, _, _, err := noPrefix.match("/gemini/v1beta/models"); err != errNoRoute {
		t.Errorf("a path under no prefix: %v, want errNoRoute", err)
	}
}

// TestWithoutKey: the caller's key= goes; the rest of the query stays as
// written.
func TestWithoutKey(t *testing.T) {
	cases := []struct{ in, out, keys string }{
		{"", "", ""},
		{"part=id", "part=id", ""},
		{"key=a", "", "a"},
		{"part=id&key=a&chart=x", "part=id&chart=x", "a"},
		{"k%65y=a%2Bb&monkey=1&keys=2", "monkey=1&keys=2", "a+b"},
		{"key=a&key=b&q=%zz", "q=%zz", "a,b"},
	}
	for _, c := range cases {
		out, keys := withoutKey(c.in)
		if out != c.out || strings.Join(keys, ",") != c.keys {
			t.Errorf("withoutKey(%q) = %q %q, want %q %q", c.in, out, keys, c.out, c.keys)
		}
	}
}

// TestRouteThroughGateway: the request arrives at the target's host and
// path, with the query less the caller's key.
func TestRouteThroughGateway(t *testing.T) {
	up := newEcho(t)
	cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
	  "upstreams": [
	    {"name": "yt", "provider": "youtube", "prefix": "/youtube/", "target": %q, "key_env": "YT_KEY"},
	    {"name": "oai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY"}]}`,
		up.URL+"/youtube", up.URL)
	r := start(t, cfg, tollgate.Config{})
	cases := []struct{ path, wantPath, wantQuery string }{
		{"/youtube/v3/videos?chart=mostPopular&key=" + phpToken, "/youtube/v3/videos", "chart=mostPopular"},
		{"/openai/v1/models?key=" + phpToken, "/v1/models", ""},
	}
	for _, c := range cases {
		code, _, b := do(t, "GET", r.url+c.path, nil, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, b)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(b), &got); err != nil {
			t.Fatal(err)
		}
		host := strings.TrimPrefix(up.URL, "http://")
		if got["host"] != host || got["path"] != c.wantPath || got["query"] != c.wantQuery {
			t.Errorf("%s arrived as %v, want host %s path %s query %q", c.path, got, host, c.wantPath, c.wantQuery)
		}
	}
	last := up.requests()[1]
	if a := last.Header.Get("Authorization"); a != "Bearer sk-real-openai-key" {
		t.Errorf("openai got Authorization %q, want the upstream's key as a bearer token", a)
	}
}

// recorder stands in for the upstreams' Transports: it records each
// request it would send, and answers 200.
type recorder struct{ got []*http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = append(r.got, req)
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

func (r *recorder) Close() error { return nil }

// fuzzGateway builds a gateway of a configuration whose upstreams'
// Transports are a recorder.
func fuzzGateway(f *testing.F, config string) (*Gateway, *recorder) {
	rdb, err := embedded.New()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rdb.Close() })
	cfg, err := Load([]byte(config), "", getenv)
	if err != nil {
		f.Fatal(err)
	}
	g, err := Build(cfg, Options{Redis: rdb})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	rec := &recorder{}
	for _, u := range g.ups {
		u.tr = rec
	}
	return g, rec
}

// FuzzRoute: whatever the request target (a path, an absolute URI, a
// CONNECT authority, dot segments plain or escaped, upload_id and the
// gateway's own session parameter in the query) and whatever the method
// and an extra header (a method override, a name with an underscore),
// the gateway sends a request only to a configured target's host, under
// the target's path, by the longest prefix, with a method the upstream's
// API uses, without method overrides or underscore names, and with no
// upload_id the gateway did not issue in the URL its cost table reads; a
// path that a dot segment would move is never sent.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"/youtube/v3/videos?part=id", "/openai/v1/x", "/youtube/../openai", "/youtube/%2e%2e/x",
		"http://evil/x", "//evil.example/x", "/openai/azure/x", "/a/..%2F..%2Fb", "/youtube/v3/..\\x", "/%2F%2Fevil",
		"evil.example:443", "*", "/openai/azure/../../youtube/v3",
		"/upload/youtube/v3/videos?uploadType=multipart&upload_id=x", "/upload/youtube/v3/videos?upload%5Fid=x&tollgate_session=00",
		"/upload/youtube/v3/videos?upload_id=x&upload_id=y&tollgate_session=ab"} {
		f.Add(s, "GET", "X-HTTP-Method-Override", "DELETE")
	}
	f.Add("/openai/v1/models", "TRACE", "X_Goog_Api_Key", "k")
	f.Add("/youtube/v3/videos?part=id", "PROPFIND", "X-Method-Override", "PUT")
	f.Add("/upload/youtube/v3/videos?upload_id=x", "PUT", "x-http-method", "DELETE")
	g, rec := fuzzGateway(f, `{"upstreams": [
	  {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": "https://youtube.googleapis.com/youtube"},
	  {"name": "upload", "provider": "youtube", "prefix": "/upload/", "target": "https://youtube.googleapis.com/upload"},
	  {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": "https://api.openai.com"},
	  {"name": "azure", "provider": "openai", "prefix": "/openai/azure/", "target": "https://example.openai.azure.com/openai/"}]}`)
	f.Fuzz(func(t *testing.T, target, method, name, value string) {
		for _, method := range []string{method, "GET", "CONNECT"} {
			raw := method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + name + ": " + value + "\r\n\r\n"
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				continue // net/http's server never serves it either
			}
			req.RemoteAddr = "127.0.0.1:9"
			rec.got = nil
			w := httptest.NewRecorder()
			g.ServeHTTP(w, req)
			if len(rec.got) == 0 {
				continue
			}
			out := rec.got[0]
			if method == "CONNECT" {
				t.Fatalf("CONNECT %q was forwarded to %v", target, out.URL)
			}
			if !strings.HasPrefix(target, "/") {
				t.Fatalf("%q, not a path, was forwarded to %v", target, out.URL)
			}
			r, _, _, err := g.router.match(req.URL.EscapedPath())
			if err != nil {
				t.Fatalf("%q was forwarded to %v, but it routes nowhere: %v", target, out.URL, err)
			}
			checkRouted(t, g.router, req.URL.EscapedPath(), r, out.URL)
			if !r.up.allows(out.Method) || out.Method != method {
				t.Fatalf("%s %q was forwarded as %s to %s, which is not sent it", method, target, out.Method, r.up.cfg.Name)
			}
			checkScrubbed(t, out.Header)
			q, _ := url.ParseQuery(out.URL.RawQuery)
			if q.Has("upload_id") || q.Has(sessionParam) {
				t.Fatalf("%q: the Transport read the query %q: an upload_id the gateway did not issue, or its own parameter", target, out.URL.RawQuery)
			}
		}
	})
}

// checkScrubbed fails when a forwarded request has a header the gateway
// never forwards.
func checkScrubbed(t *testing.T, h http.Header) {
	t.Helper()
	for k := range h {
		if strings.Contains(k, "_") {
			t.Fatalf("a header named %q was forwarded", k)
		}
		switch http.CanonicalHeaderKey(k) {
		case "X-Http-Method-Override", "X-Http-Method", "X-Method-Override":
			t.Fatalf("the method override %s: %q was forwarded", k, h[k])
		}
	}
}

// FuzzHeaders: whatever headers a caller sends (a token anywhere, an
// underscore name, a method override, an OpenAI organization or project),
// a request is forwarded only with one caller's token, and then with the
// upstream's key alone in its key's header, no token of a caller where
// an SDK puts a key nor in the query, no header the gateway never
// forwards, and the organization and project
// the configuration sets.
func FuzzHeaders(f *testing.F) {
	for _, s := range [][2]string{
		{"X-Goog-Api-Key", phpToken}, {"X_Goog_Api_Key", realKey}, {"Authorization", "Bearer " + nodeToken},
		{"OpenAI-Organization", "org-evil"}, {"OpenAI-Project", "proj_default"}, {"X-HTTP-Method-Override", "DELETE"},
		{"x-api-key", phpToken}, {"Authorization_", "Bearer x"}, {"Openai_Project", "p"},
	} {
		f.Add("POST", "/openai/v1/chat/completions", s[0], s[1], "Authorization", "Bearer "+phpToken)
		f.Add("GET", "/youtube/v3/videos?part=id&key="+phpToken, s[0], s[1], "X-Goog-Api-Key", phpToken)
	}
	g, rec := fuzzGateway(f, `{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
	  "upstreams": [
	  {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": "https://youtube.googleapis.com/youtube", "key_env": "YT_KEY"},
	  {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": "https://api.openai.com", "key_env": "OAI_KEY",
	   "options": {"organization": "org-cfg"}}]}`)
	f.Fuzz(func(t *testing.T, method, target, n1, v1, n2, v2 string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + n1 + ": " + v1 + "\r\n" + n2 + ": " + v2 + "\r\nContent-Length: 2\r\n\r\n{}"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		req.RemoteAddr = "127.0.0.1:9"
		rec.got = nil
		g.ServeHTTP(httptest.NewRecorder(), req)
		if len(rec.got) == 0 {
			return
		}
		out := rec.got[0]
		checkScrubbed(t, out.Header)
		var key, keyHeader string
		switch {
		case strings.HasPrefix(out.URL.Path, "/youtube/"):
			key, keyHeader = realKey, "X-Goog-Api-Key"
			if out.Header.Get("Authorization") != "" {
				t.Fatalf("youtube got Authorization %q", out.Header.Get("Authorization"))
			}
		default:
			key, keyHeader = "Bearer sk-real-openai-key", "Authorization"
			if o, p := out.Header.Values("Openai-Organization"), out.Header.Values("Openai-Project"); len(o) != 1 || o[0] != "org-cfg" || len(p) != 0 {
				t.Fatalf("openai got OpenAI-Organization %q, OpenAI-Project %q; want org-cfg and none", o, p)
			}
			if out.Header.Get("X-Goog-Api-Key") != "" {
				t.Fatalf("openai got X-Goog-Api-Key")
			}
		}
		if v := out.Header.Values(keyHeader); len(v) != 1 || v[0] != key {
			t.Fatalf("%s: %q, want the key alone", keyHeader, v)
		}
		// The headers an SDK puts its API key in (a caller may still copy
		// its token into a header of its own choosing).
		for _, k := range []string{"Authorization", "X-Goog-Api-Key", "X-Api-Key", "Api-Key"} {
			for _, v := range out.Header.Values(k) {
				if strings.Contains(v, phpToken) || strings.Contains(v, nodeToken) {
					t.Fatalf("a caller's token was forwarded in %s", k)
				}
			}
		}
		// The query parameter an SDK puts its API key in (key=); a caller
		// may still copy its token into a parameter of its own choosing.
		for _, v := range out.URL.Query()["key"] {
			if strings.Contains(v, phpToken) || strings.Contains(v, nodeToken) {
				t.Fatalf("a caller's token was forwarded in the query's key: %q", out.URL.RawQuery)
			}
		}
	})
}

// checkRouted fails unless out is under r's target, by the longest
// prefix of path, with no dot segment.
func checkRouted(t *testing.T, rt *router, path string, r *route, out *url.URL) {
	t.Helper()
	for _, other := range rt.routes {
		if len(other.prefix) > len(r.prefix) && strings.HasPrefix(path, other.prefix) {
			t.Fatalf("%q routed to %q, but %q is longer", path, r.prefix, other.prefix)
		}
	}
	if out.Scheme != r.target.Scheme || out.Host != r.target.Host || out.User != nil {
		t.Fatalf("%q went to %v, not to the target's host %s", path, out, r.target.Host)
	}
	base := strings.TrimRight(r.target.EscapedPath(), "/") + "/"
	if !strings.HasPrefix(out.EscapedPath(), base) {
		t.Fatalf("%q goes to %q, outside the target's path %q", path, out.EscapedPath(), base)
	}
	if resolved := out.ResolveReference(&url.URL{}); !strings.HasPrefix(resolved.EscapedPath(), base) {
		t.Fatalf("%q resolves to %q, outside the target's path", path, resolved.EscapedPath())
	}
	for _, seg := range strings.FieldsFunc(out.Path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			t.Fatalf("%q goes out with a dot segment: %q", path, out.Path)
		}
	}
}
