// Package keyscan finds tollgate's keys by pattern with SCAN (never
// KEYS), on one node or on every node of a cluster or ring, for the
// packages that read what many processes wrote: quota's operators'
// survey and the who-spends reports.
package keyscan

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Glob escapes s for a SCAN MATCH pattern, so that a prefix or name with
// * ? [ ] or \ in it matches only itself.
func Glob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// All returns the keys matching a pattern on every node: every master of
// a cluster, every shard of a ring, or the one server of any other client.
func All(ctx context.Context, client redis.UniversalClient, match string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	each := func(ctx context.Context, c redis.UniversalClient) error {
		keys, err := Node(ctx, c, match)
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		return out, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return each(ctx, n) })
	case *redis.Ring:
		return out, c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return each(ctx, n) })
	}
	return out, each(ctx, client)
}

// Node walks one node's keys matching a pattern with SCAN, a thousand at
// a time.
func Node(ctx context.Context, c redis.UniversalClient, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return out, err
		}
		out = append(out, keys...)
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}
