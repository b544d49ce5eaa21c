package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestStatusWarnsOfARedisThatLosesCounts: status names, once on stderr,
// the setting of a Redis that evicts keys (allkeys-lru) or has no
// append-only file, and still reports; a Redis that keeps everything gets
// no warning.
func TestStatusWarnsOfARedisThatLosesCounts(t *testing.T) {
	const (
		evicts = "tollgate: warning: the Redis evicts keys under memory pressure (maxmemory-policy allkeys-lru): it may drop a window's count and admit past the limit; set maxmemory-policy noeviction\n"
		noAOF  = "tollgate: warning: the Redis has appendonly no: a restart forgets what it counted since its last snapshot (everything, without snapshots) and admits it again; set appendonly yes\n"
	)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru", "--appendonly", "yes"}, evicts},
		{"no persistence", nil, noAOF},
		{"what tollgate needs", keepsEverything, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := upstreamOnly(t)
			e.server = redistest.Start(t, c.args...)
			e.url = "redis://" + e.server.Addr
			lim := e.limiter(t, nil)
			tr := e.process(t, lim, nil)
			e.spend(t, tr, "project-a", "/v1/items", 1)
			described(t, lim, "pool", "project-a")
			code, out, errs := cmd(t, nil, "status", "-redis", e.url)
			if code != 0 || errs != c.want || !strings.Contains(out, "project-a") {
				t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant 0, stderr %q and the report", code, errs, out, c.want)
			}
		})
	}
}
