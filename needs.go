package tollgate

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/internal/redisneeds"
)

// needsTimeout bounds the check of what the Redis keeps.
const needsTimeout = 5 * time.Second

// needsCheck is the one check, at start, of whether the shared Redis keeps
// what tollgate counts (package internal/redisneeds): a Redis that evicts
// keys can drop a window's count and admit past the limit, one without an
// append-only file forgets counts when it restarts. Each way it may lose
// them is logged once, at Warn, on the Config's Logger; nothing when the
// Redis does not tell (its access control denies INFO) or does not answer.
type needsCheck struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startNeeds starts the check off the caller's goroutine, on the Redis of
// cfg.Limiter: New never waits for Redis. Without a Logger there is no one
// to tell, and no check: it returns nil.
func startNeeds(cfg *Config, h *hooks) *needsCheck {
	if cfg.Logger == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), needsTimeout)
	n := &needsCheck{cancel: cancel, done: make(chan struct{})}
	rdb, _ := limiterStore(cfg.Limiter)
	go func() {
		defer close(n.done)
		defer cancel()
		for _, w := range redisneeds.Warnings(ctx, rdb) {
			h.log(ctx, slog.LevelWarn, "tollgate: "+w)
		}
	}()
	return n
}

// stop ends the check, if it still runs; n may be nil (no check).
func (n *needsCheck) stop() {
	if n != nil {
		n.cancel()
		<-n.done
	}
}
