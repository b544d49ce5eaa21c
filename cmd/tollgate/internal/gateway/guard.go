package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// What a caller sends that the gateway never forwards as it is: the
// quota a request spends is decided by the configuration and the
// caller's identity, never by headers or parameters the caller chooses.

// overrideHeaders make Google's APIs (and others) treat a request as
// another method than the one it is sent, and so charged, with.
var overrideHeaders = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// organizationHeaders choose an OpenAI request's organization and
// project, and with them its quota: the upstream's options set them.
var organizationHeaders = []string{"Openai-Organization", "Openai-Project"}

// scrub removes from a request's headers those the gateway never
// forwards: names with an underscore (servers that fold "_" into "-"
// would read them as others, the key's header included; nginx drops
// them by default) and the method overrides.
func scrub(h http.Header) {
	for k := range h {
		if strings.Contains(k, "_") {
			delete(h, k)
		}
	}
	for _, k := range overrideHeaders {
		h.Del(k)
	}
}

// Methods the providers' APIs use; the others are answered 405.
var (
	methodsYouTube   = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	methodsOpenAI    = []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	methodsGemini    = []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete}
	methodsREST      = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	methodsAnthropic = methodsOpenAI
)

// allows reports whether an upstream forwards method.
func (u *upstream) allows(method string) bool {
	for _, m := range u.methods {
		if m == method {
			return true
		}
	}
	return false
}

// sameSite reports whether a request without callers comes from this
// machine's own clients and not from a web page of another origin: its
// Host names the gateway (a loopback name or address, the address it was
// reached at, or the public URL's host), and, when a browser says where
// the request comes from, it is the gateway's own origin. The first
// result is false for a foreign Host (421), the second for a foreign
// origin (403).
func (g *Gateway) sameSite(r *http.Request) (hostOK, originOK bool) {
	if r.Host != "" && !g.ownHost(r) {
		return false, false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true, false
	}
	if o := r.Header.Values("Origin"); len(o) > 0 {
		if len(o) > 1 {
			return true, false
		}
		u, err := url.Parse(o[0])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			return true, false
		}
		if !strings.EqualFold(u.Host, r.Host) && (g.public == nil || !strings.EqualFold(u.Host, g.public.Host)) {
			return true, false
		}
	}
	return true, true
}

// ownHost reports whether a request's Host names the gateway.
func (g *Gateway) ownHost(r *http.Request) bool {
	host := r.Host
	if g.public != nil && strings.EqualFold(host, g.public.Host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if lh, _, err := net.SplitHostPort(la.String()); err == nil {
			return net.ParseIP(lh).Equal(ip)
		}
	}
	return false
}

// origin returns the scheme and host a rewritten Location points at: the
// public URL when configured, else the address the request's connection
// was accepted on (the gateway serves plain HTTP), never the Host the
// request names. ctx is the request's.
func (g *Gateway) origin(ctx context.Context) string {
	if g.public != nil {
		return strings.TrimRight(g.public.String(), "/")
	}
	if la, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		return "http://" + la.String()
	}
	return "http://localhost"
}

// sessionParam is the parameter the gateway adds to an upload session's
// URI it rewrote: a MAC of its upload_id, which only the gateway can
// write. It never reaches the upstream.
const sessionParam = "tollgate_session"

// newSessionKey returns the key of an upstream's session MACs: derived
// from its key, so that gateways sharing the key (and a restarted one)
// know each other's sessions; random without a key.
func newSessionKey(key string) []byte {
	if key == "" {
		b := make([]byte, 32)
		rand.Read(b)
		return b
	}
	sum := sha256.Sum256([]byte("tollgate gateway upload sessions\x00" + key))
	return sum[:]
}

// sessionMAC returns the MAC of an upload_id.
func (u *upstream) sessionMAC(id string) string {
	m := hmac.New(sha256.New, u.sessionKey)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// uploadSession splits a raw query: an upload_id continues a session
// (free, never paused) only when it comes with the MAC the gateway gave
// its session URI. It returns the query the Transport classifies (less
// the MAC, and less the upload_ids that are not the gateway's) and the
// upload_ids held back, to add again once the request is charged.
func (u *upstream) uploadSession(raw string) (query, hidden string) {
	if !strings.Contains(raw, "upload_id") && !strings.Contains(raw, sessionParam) && !strings.Contains(raw, "%") {
		return raw, ""
	}
	var kept, ids []string
	var idValues []string
	mac := ""
	macs := 0
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		n, err := url.QueryUnescape(name)
		if err != nil {
			n = name
		}
		switch n {
		case sessionParam:
			mac, macs = value, macs+1
			continue
		case "upload_id":
			ids = append(ids, part)
			v, err := url.QueryUnescape(value)
			if err != nil {
				v = value
			}
			idValues = append(idValues, v)
			continue
		}
		kept = append(kept, part)
	}
	if len(ids) == 0 {
		return strings.Join(kept, "&"), ""
	}
	if len(ids) == 1 && macs == 1 && hmac.Equal([]byte(mac), []byte(u.sessionMAC(idValues[0]))) {
		return strings.Join(append(kept, ids...), "&"), ""
	}
	return strings.Join(kept, "&"), strings.Join(ids, "&")
}

// thirdParty reports whether a target is another party's API: a host
// that is not "localhost", a loopback or a private address. Such
// targets get no X-Forwarded-For unless the configuration asks.
func thirdParty(u *url.URL) bool {
	h := strings.ToLower(u.Hostname())
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast())
}
