// Package embedded runs a Redis inside the process, for programs with no
// Redis of their own: a single process, demos and tests. It is the one
// part of tollgate that links an emulated Redis (miniredis, with its Lua
// interpreter); the core packages never import it.
//
//	rdb, err := embedded.New()
//	if err != nil { ... }
//	defer rdb.Close()
//	lim, err := quota.New(rdb)
//
// The state lives as long as the Client and is shared only by the
// goroutines of this process; to share a quota between processes, give
// quota.New a client of a real Redis.
package embedded

import (
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Client is a go-redis client of a Redis running in this process, on a
// loopback port. It is a redis.UniversalClient like any other; Close also
// stops the server.
type Client struct {
	*redis.Client
	server *miniredis.Miniredis
	once   sync.Once
	err    error
}

// New starts an in-process Redis on a free loopback port and returns a
// client of it. Key TTLs run on the wall clock, as in a real Redis, so idle
// scopes vanish.
func New() (*Client, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: starting the in-process redis: %w", err)
	}
	return &Client{
		Client: redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2}),
		server: m,
	}, nil
}

// Close closes the client and stops the server; later calls return the
// first call's result.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.err = c.Client.Close()
		c.server.Close()
	})
	return c.err
}
