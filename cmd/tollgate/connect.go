package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
	return lim, client, nil
}

// dial makes a client for spec: one redis:// or rediss:// URL, or several
// separated by commas (the nodes of a Redis Cluster, one credential for
// all).
func dial(spec string) (redis.UniversalClient, error) {
	var opts []*redis.Options
	for i, u := range strings.Split(spec, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		if _, err := url.Parse(u); err != nil {
			// url's errors quote the URL, password and all.
			return nil, usagef("-redis: item %d is not a URL", i+1)
		}
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, usagef("-redis %s: %v", redact(u), err)
		}
		// Notice an unreachable Redis within seconds.
		o.DialTimeout, o.DialerRetries, o.MaxRetries = 2*time.Second, 1, 1
		opts = append(opts, o)
	}
	if len(opts) == 1 {
		return redis.NewClient(opts[0]), nil
	}
	co := &redis.ClusterOptions{DialTimeout: 2 * time.Second, MaxRetries: 1}
	for _, o := range opts {
		co.Addrs = append(co.Addrs, o.Addr)
		co.Username, co.Password, co.TLSConfig = o.Username, o.Password, o.TLSConfig
	}
	return redis.NewClusterClient(co), nil
}

// redact hides the passwords of Redis URLs.
func redact(spec string) string {
	parts := strings.Split(spec, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// isTerminal reports whether f is a terminal -watch may redraw in place.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}
