package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redisurl"
	"github.com/tollgate/tollgate/quota"
)

// connection is where the command finds the quotas: the -redis and
// -prefix flags.
type connection struct {
	url    string
	prefix string
	spec   string // the URL used: -redis or $TOLLGATE_REDIS
}

// open connects to the Redis the flags name, checks within a few seconds
// that it answers, and returns a limiter on it with the prefix, and the
// client, which the caller closes.
func (c *cli) open(ctx context.Context, conn *connection) (*quota.Limiter, redis.UniversalClient, error) {
	spec := conn.url
	if spec == "" {
		spec = c.getenv("TOLLGATE_REDIS")
	}
	if spec == "" {
		return nil, nil, usagef("no Redis: give -redis URL or set TOLLGATE_REDIS")
	}
	conn.spec = spec
	client, err := dial(spec)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("redis at %s does not answer: %w", redact(spec), err)
	}
	opts := []quota.Option{quota.WithPrefix(conn.prefix)}
	if c.clock != nil {
		opts = append(opts, quota.WithClock(c.clock))
	}
	lim, err := quota.New(client, opts...)
	if err != nil {
		client.Close()
		return nil, nil, &usageError{err.Error()}
	}
	if redisurl.IsSentinel(spec) {
		// The master answers; it must have the replica that acknowledges
		// each write.
		if err := lim.Ping(pctx, "replicas"); err != nil {
			client.Close()
			return nil, nil, redisurl.NoReplica(spec, err)
		}
	}
	return lim, client, nil
}

// dial makes a client for spec: one redis:// or rediss:// URL, several
// separated by commas (the nodes of a Redis Cluster, one credential for
// all), or a Sentinel URL (its query names master_name).
func dial(spec string) (redis.UniversalClient, error) {
	client, err := redisurl.Client(spec)
	if err != nil {
		return nil, usagef("-redis %s: %v", redact(spec), err)
	}
	return client, nil
}

// redact says which Redis spec names, without its passwords: a Sentinel
// URL as its master set and sentinels.
func redact(spec string) string { return redisurl.Describe(spec) }

// isTerminal reports whether f is a terminal -watch may redraw in place.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}
