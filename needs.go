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

// checkNeeds starts the check off the caller's goroutine: New never waits
// for Redis. Without a Logger there is no one to tell, and no check.
func (t *Transport) checkNeeds() {
	if t.cfg.Logger == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), needsTimeout)
	t.needs = &needsCheck{cancel: cancel, done: make(chan struct{})}
	rdb, _ := limiterStore(t.cfg.Limiter)
	go func() {
		defer close(t.needs.done)
		defer cancel()
		for _, w := range redisneeds.Warnings(ctx, rdb) {
			t.hooks.log(ctx, slog.LevelWarn, "tollgate: "+w)
		}
	}()
}

// stopNeeds ends the check, if it still runs.
func (t *Transport) stopNeeds() {
	if t.needs != nil {
		t.needs.cancel()
		<-t.needs.done
	}
}
