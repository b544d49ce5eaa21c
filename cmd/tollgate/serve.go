package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/gateway"
	"github.com/tollgate/tollgate/internal/redisurl"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// serve runs the gateway (tollgate serve -config FILE) until ctx ends
// (SIGINT, SIGTERM), then drains it and returns nil. A configuration that
// cannot work is an error before it listens.
func (c *cli) serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tollgate serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("config", "", "the gateway's JSON configuration file (see docs/gateway.md)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("serve: -config FILE is required")
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return usagef("serve: reading the configuration: %v", err)
	}
	cfg, err := gateway.Load(data, filepath.Dir(*file), c.getenv)
	if err != nil {
		return &usageError{"serve: " + strings.TrimPrefix(err.Error(), "gateway: ")}
	}
	rdb, where, err := c.gatewayRedis(cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	g, err := gateway.Build(cfg, gateway.Options{Redis: rdb, Log: c.stderr})
	if err != nil {
		return &usageError{"serve: " + strings.TrimPrefix(err.Error(), "gateway: ")}
	}
	defer g.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	fmt.Fprintf(c.stderr, "tollgate serve: listening on http://%s, quotas in %s\n", ln.Addr(), where)
	g.Describe(c.stderr)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := rdb.Ping(pctx).Err(); err != nil {
		fmt.Fprintln(c.stderr, "tollgate serve: redis does not answer yet; upstreams that fail closed answer 503 until it does")
	}
	cancel()
	err = g.Serve(ctx, ln)
	fmt.Fprintln(c.stderr, "tollgate serve: stopped")
	return err
}

// gatewayRedis connects to the gateway's Redis: the configuration's URL,
// else $TOLLGATE_REDIS, else an in-process Redis; and says which, without
// a password.
func (c *cli) gatewayRedis(spec string) (redis.UniversalClient, string, error) {
	if spec == "" {
		spec = c.getenv("TOLLGATE_REDIS")
	}
	if spec == "" {
		local, err := embedded.New()
		if err != nil {
			return nil, "", fmt.Errorf("serve: %v", err)
		}
		return local, "an in-process Redis (this gateway alone)", nil
	}
	rdb, err := dial(spec)
	if err != nil {
		return nil, "", &usageError{"serve: redis: " + err.Error()}
	}
	if redisurl.IsSentinel(spec) {
		if err := replicaPresent(rdb, spec); err != nil {
			rdb.Close()
			return nil, "", fmt.Errorf("serve: %w", err)
		}
	}
	return rdb, redact(spec), nil
}

// replicaPresent checks, when the master a Sentinel URL names answers,
// that it has the replica each decision waits for; a master that does
// not answer is left to the outage mode.
func replicaPresent(rdb redis.UniversalClient, spec string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if rdb.Ping(ctx).Err() != nil {
		return nil
	}
	lim, err := quota.New(rdb)
	if err != nil {
		return err
	}
	if err := lim.Ping(ctx, "replicas"); err != nil {
		return redisurl.NoReplica(spec, err)
	}
	return nil
}
