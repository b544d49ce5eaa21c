package redisneeds_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redisneeds"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota/embedded"
)

const (
	evicts = "the Redis evicts keys under memory pressure (maxmemory-policy allkeys-lru): it may drop a window's count and admit past the limit; set maxmemory-policy noeviction"
	noAOF  = "the Redis has appendonly no: a restart forgets what it counted since its last snapshot (everything, without snapshots) and admits it again; set appendonly yes"
)

// TestWarnings: real redis-servers, each configured one way, and what
// the check says of each; a user the ACL denies INFO, and the
// in-process Redis, get nothing.
func TestWarnings(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no persistence (redistest's default)", nil, []string{noAOF}},
		{"evicting, with an append-only file", []string{"--maxmemory-policy", "allkeys-lru", "--appendonly", "yes"}, []string{evicts}},
		{"evicting, no persistence", []string{"--maxmemory-policy", "allkeys-lru"}, []string{evicts, noAOF}},
		{"snapshots only", []string{"--save", "3600 1"}, []string{noAOF}},
		{"what tollgate needs", []string{"--appendonly", "yes", "--maxmemory-policy", "noeviction"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := redistest.Start(t, c.args...)
			if got := warnings(t, s.Client(t)); !slices.Equal(got, c.want) {
				t.Errorf("Warnings = %q\nwant %q", got, c.want)
			}
		})
	}

	s := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	s.SetUser(t, "tollgate", "reset", "on", ">pw", "~tollgate:*", "+ping", "+evalsha", "+eval", "+time")
	if got := warnings(t, s.UserClient(t, "tollgate", "pw")); len(got) != 0 {
		t.Errorf("a user denied INFO: Warnings = %q, want none", got)
	}
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if got := warnings(t, rdb); len(got) != 0 {
		t.Errorf("the in-process Redis: Warnings = %q, want none", got)
	}
}

func warnings(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return redisneeds.Warnings(ctx, rdb)
}
