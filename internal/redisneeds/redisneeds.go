// Package redisneeds checks that a Redis keeps what tollgate writes: that
// it evicts no keys under memory pressure (maxmemory-policy noeviction)
// and keeps every write across a restart (appendonly yes). A Redis that
// evicts can drop a window's count and admit past the limit; one without
// an append-only file forgets, when it restarts, what it counted since
// its last snapshot (every count, and the operators' record, without
// snapshots).
//
// The check reads INFO memory and INFO persistence; a Redis whose access
// control denies INFO is not checked, and that is no error.
package redisneeds

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Warnings returns a line for each way the Redis behind rdb may lose
// what tollgate counts, each naming the setting to change; none when it
// keeps everything, or when it does not say (INFO denied, a Redis that
// does not answer, an emulated one).
func Warnings(ctx context.Context, rdb redis.UniversalClient) []string {
	var out []string
	if memory, err := rdb.Info(ctx, "memory").Result(); err == nil {
		if policy := field(memory, "maxmemory_policy"); policy != "" && policy != "noeviction" {
			out = append(out, fmt.Sprintf("the Redis evicts keys under memory pressure (maxmemory-policy %s): it may drop a window's count and admit past the limit; set maxmemory-policy noeviction", policy))
		}
	}
	if persistence, err := rdb.Info(ctx, "persistence").Result(); err == nil && field(persistence, "aof_enabled") == "0" {
		out = append(out, "the Redis has appendonly no: a restart forgets what it counted since its last snapshot (everything, without snapshots) and admits it again; set appendonly yes")
	}
	return out
}

// field returns the value of one "name:value" line of an INFO reply, or
// "" when it has none.
func field(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
