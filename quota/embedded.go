package quota

import (
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// NewEmbedded returns a Limiter on a Redis that runs inside this process
// (miniredis, listening on a loopback port), for programs with no Redis of
// their own: single-process use, demos and tests. Its state lives as long as
// the Limiter and is shared only by the goroutines of this process; to share
// a quota between processes, give [New] a real Redis. Close the Limiter to
// stop the server.
//
// Key TTLs run on the wall clock, as in a real Redis, so idle scopes vanish.
func NewEmbedded(opts ...Option) (*Limiter, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("quota: starting the embedded redis: %w", err)
	}
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2})
	l := New(client, opts...)
	var once sync.Once
	l.onClose = func() error {
		var err error
		once.Do(func() {
			err = client.Close()
			m.Close()
		})
		return err
	}
	return l, nil
}
