package gateway

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// TestSharesAmongCallers: an upstream's "shares" divides its day among
// the gateway's callers: the greedy one stops at its share, and the other
// still finds its own.
func TestSharesAmongCallers(t *testing.T) {
	_, simURL := newSim(t, ytsim.Config{Quota: 1000})
	r := start(t, fmt.Sprintf(`{
  "listen": "127.0.0.1:0",
  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}, {"name": "node", "token_env": "TOKEN_NODE"}],
  "upstreams": [{"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": %q,
    "key_env": "YT_KEY", "options": {"quota": 20, "table": "classic"}, "policy": {"on_refusal": "fail"},
    "shares": {"weights": {"php-cron": 1, "node": 1}}, "pace": {"burst": 1}}]
}`, simURL+"/youtube"), tollgate.Config{})
	spend := func(token string) (admitted int) {
		t.Helper()
		for range 30 {
			code, _, body := do(t, "GET", r.url+"/youtube/v3/videos?part=id&chart=mostPopular", map[string]string{"Authorization": "Bearer " + token}, nil)
			switch code {
			case 200:
				admitted++
			case 429:
			default:
				t.Fatalf("answered %d: %s", code, body)
			}
		}
		return admitted
	}
	// 20 units less the 5% reserve: 19, 9.5 each.
	if got := spend(phpToken); got != 9 {
		t.Errorf("php-cron, greedy: %d admitted, want its share, 9", got)
	}
	if got := spend(nodeToken); got != 9 {
		t.Errorf("node after php-cron: %d admitted, want its share, 9", got)
	}
}
