package gateway

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// credentialHeaders are the headers an SDK sends its API key in: a caller
// authenticates with one of the first four, and a request forwarded with
// the upstream's key carries none of the caller's (Api-Key, Azure OpenAI's,
// is never a caller's token here, but a token copied into it would reach
// the upstream beside the gateway's key).
var credentialHeaders = []string{"Authorization", "X-Goog-Api-Key", "X-Api-Key", "X-Shopify-Access-Token", "Api-Key"}

// rewrite makes the outgoing request: the target's URL, the caller's
// credentials replaced by the upstream's key, X-Forwarded-For as
// configured. ReverseProxy has removed the hop-by-hop headers.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	f := flightOf(pr.In.Context())
	t := f.up.cfg.target
	pr.Out.URL = &url.URL{Scheme: t.Scheme, Host: t.Host, Path: f.path, RawPath: f.raw, RawQuery: f.query}
	pr.Out.Host = "" // the target's
	h := pr.Out.Header
	for _, k := range organizationHeaders {
		h.Del(k)
	}
	if f.up.organization != "" {
		h.Set("OpenAI-Organization", f.up.organization)
	}
	if f.up.project != "" {
		h.Set("OpenAI-Project", f.up.project)
	}
	if f.up.cfg.key != nil {
		for _, k := range credentialHeaders {
			h.Del(k)
		}
		if f.up.bearer {
			h.Set("Authorization", "Bearer "+f.up.cfg.key.get())
		} else {
			h.Set(f.up.keyHeader, f.up.cfg.key.get())
		}
	} else if len(f.keys) > 0 && f.up.queryKey && h.Get(f.up.keyHeader) == "" {
		// A caller's own key, passed through in a header: never in the URL.
		h.Set(f.up.keyHeader, f.keys[0])
	}
	switch f.up.forwardedFor {
	case "set":
		pr.SetXForwarded()
		h.Del("X-Forwarded-Host")
		h.Del("X-Forwarded-Proto")
	case "append":
		if prior := pr.In.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			h["X-Forwarded-For"] = append([]string(nil), prior...)
		}
		ip, _, err := net.SplitHostPort(pr.In.RemoteAddr)
		if err == nil {
			prior := strings.Join(h.Values("X-Forwarded-For"), ", ")
			if prior != "" {
				ip = prior + ", " + ip
			}
			h.Set("X-Forwarded-For", ip)
		}
	}
}

// relocate points a Location under a configured target (YouTube's
// resumable upload session URI, a redirect) at the gateway, under that
// target's prefix, so that the caller's next requests come through it
// too. Other Locations are left as they are.
func (g *Gateway) relocate(resp *http.Response) error {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil || !u.IsAbs() {
		return nil
	}
	f := flightOf(resp.Request.Context())
	if f == nil {
		return nil
	}
	var best *route
	rest := ""
	for i := range g.router.routes {
		rt := &g.router.routes[i]
		t := rt.target
		if !strings.EqualFold(u.Scheme, t.Scheme) || !strings.EqualFold(u.Host, t.Host) {
			continue
		}
		r, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimRight(t.EscapedPath(), "/")+"/")
		if ok && (best == nil || len(t.EscapedPath()) > len(best.target.EscapedPath())) {
			best, rest = rt, r
		}
	}
	if best == nil || hasDotSegment(u.EscapedPath()) {
		return nil
	}
	q := ""
	if u.RawQuery != "" {
		q = "?" + u.RawQuery
		if best.up.hidesUploadID {
			if id := u.Query().Get("upload_id"); id != "" {
				q += "&" + sessionParam + "=" + best.up.sessionMAC(id)
			}
		}
	}
	resp.Header.Set("Location", g.origin(resp.Request.Context())+best.prefix+rest+q)
	return nil
}

// dispatch sends a request with its upstream's Transport.
type dispatch struct{}

func (dispatch) RoundTrip(req *http.Request) (*http.Response, error) {
	return flightOf(req.Context()).up.tr.RoundTrip(req)
}

// sender is every Transport's base: it marks a request as sent (it then
// finishes on SIGTERM), refuses it once the gateway is shutting down and
// it was not, and keeps the upstream's refusals for replaying.
type sender struct {
	g    *Gateway
	base http.RoundTripper
}

func (s *sender) RoundTrip(req *http.Request) (*http.Response, error) {
	f := flightOf(req.Context())
	if f != nil && !s.g.send(f) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errShuttingDown
	}
	if f != nil && f.hidden != "" {
		req = req.Clone(req.Context())
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += f.hidden
	}
	resp, err := s.base.RoundTrip(req)
	if err == nil && f != nil && resp.StatusCode >= 400 {
		c := &captured{status: resp.StatusCode, header: resp.Header.Clone(), body: resp.Body}
		resp.Body = c
		f.answer = c
	}
	return resp, err
}
