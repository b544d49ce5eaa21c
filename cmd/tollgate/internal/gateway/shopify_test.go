package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/shopsim"
	"github.com/tollgate/tollgate/providers/shopify"
)

// shopToken is the shop's access token the gateway holds.
const shopToken = "shpat_real_token_0000000000"

// shopUpstream is a simulated Shopify on loopback that records the
// headers of each request it receives.
type shopUpstream struct {
	*shopsim.Server
	url string

	mu   sync.Mutex
	seen []http.Header
}

func newShopUpstream(t *testing.T) *shopUpstream {
	t.Helper()
	s := &shopUpstream{Server: shopsim.New(shopsim.Config{Shop: "acme.myshopify.com"})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		s.mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *shopUpstream) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

// shopifyConfig serves the Admin API under /shopify/ to two callers with
// the shop's token.
func shopifyConfig(target string) string {
	return fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
	  "upstreams": [{"name": "shopify", "provider": "shopify", "prefix": "/shopify/", "target": %q, "key_env": "SHOP_TOKEN",
	    "options": {"shop": "acme.myshopify.com"}}]}`, target)
}

// TestShopifyCredentials: a caller presents its token where Shopify's
// clients put the shop's (X-Shopify-Access-Token) or in any other place;
// the upstream gets the gateway's token alone; a bad token never reaches
// it; the query is charged to the scope a Go process's
// shopify.NewTransport charges for that token.
func TestShopifyCredentials(t *testing.T) {
	const path = "/shopify/admin/api/2025-10/graphql.json"
	query := `{"query": "{ products(first: 10) { nodes { id } } }"}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"X-Shopify-Access-Token", map[string]string{"X-Shopify-Access-Token": phpToken}, 200},
		{"bearer token", map[string]string{"Authorization": "Bearer " + nodeToken}, 200},
		{"a bad token", map[string]string{"X-Shopify-Access-Token": "shpat_guess"}, 401},
		{"the shop's own token", map[string]string{"X-Shopify-Access-Token": shopToken}, 401},
		{"tokens of two callers", map[string]string{"X-Shopify-Access-Token": phpToken, "Authorization": "Bearer " + nodeToken}, 401},
		{"no token", map[string]string{}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newShopUpstream(t)
			var decided decisions
			r := start(t, shopifyConfig(up.url), tollgate.Config{Trace: tollgate.Trace{Decided: decided.hook}})
			h := map[string]string{"Content-Type": "application/json"}
			for k, v := range tc.header {
				h[k] = v
			}
			code, _, b := do(t, "POST", r.url+path, h, strings.NewReader(query))
			if code != tc.status {
				t.Fatalf("status %d (%s), want %d", code, b, tc.status)
			}
			noSecrets(t, "the answer", b)
			seen := up.headers()
			if tc.status != 200 {
				if len(seen) != 0 {
					t.Errorf("the upstream received %d requests, want none", len(seen))
				}
				return
			}
			if len(seen) != 1 || seen[0].Get("X-Shopify-Access-Token") != shopToken || len(seen[0].Values("X-Shopify-Access-Token")) != 1 || seen[0].Get("Authorization") != "" {
				t.Fatalf("the upstream got %d requests, the first with a token of %d bytes and Authorization %q; want the gateway's token alone",
					len(seen), len(seen[0].Get("X-Shopify-Access-Token")), seen[0].Get("Authorization"))
			}
			if st := up.Stats(); st.Queries != 1 {
				t.Errorf("the simulator ran %d queries, want 1", st.Queries)
			}
			d := decided.list()
			if want := shopify.Scope("acme.myshopify.com", shopToken); len(d) != 1 || d[0].Scope != want {
				t.Errorf("decisions %+v, want one in scope %q", d, want)
			}
		})
	}
}
