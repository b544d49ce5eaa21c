package gateway

import (
	"net"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate"
)

// caller returns the name of the caller whose token the request carries
// ("" without callers); false when it carries none, an unknown one, or
// tokens of several callers.
func (g *Gateway) caller(r *http.Request) (string, bool) {
	if g.loopback {
		return "", true
	}
	var presented []string
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		for _, v := range h {
			tok := bearer(v)
			if tok == "" {
				return "", false // Basic, or no token: not a caller's
			}
			presented = append(presented, tok)
		}
	}
	presented = append(presented, r.Header.Values("X-Goog-Api-Key")...)
	presented = append(presented, r.Header.Values("X-Api-Key")...)              // Anthropic's SDKs
	presented = append(presented, r.Header.Values("X-Shopify-Access-Token")...) // Shopify's clients
	_, keys := withoutKey(r.URL.RawQuery)
	presented = append(presented, keys...)
	name := ""
	for _, tok := range presented {
		n, ok := g.callers[tollgate.HashCredential(strings.TrimSpace(tok))]
		if !ok || (name != "" && n != name) {
			return "", false
		}
		name = n
	}
	return name, name != ""
}

// bearer returns the token of an "Authorization: Bearer" value, or "".
func bearer(v string) string {
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// isLoopback reports whether a RemoteAddr is a loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
