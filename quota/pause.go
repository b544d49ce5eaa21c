package quota

import (
	"context"
	"time"
)

// Pause stops every decision on bucket in scope from admitting anything
// before d has passed, in every process sharing the Redis: callers that may
// wait get holds dated after the pause, the others are refused with a
// RetryAfter that ends with it. An empty bucket pauses the whole scope. Use
// it when the upstream says its quota is spent (an HTTP 429 with
// Retry-After, YouTube's quotaExceeded). A shorter pause never cuts a
// longer one short. The pause reads as an upstream's (Paused.Upstream),
// with no reason, and no process is told of it: tollgate's Transport tells
// them of an upstream's pause.
func (l *Limiter) Pause(ctx context.Context, scope, bucket string, d time.Duration) error {
	if err := l.check(scope); err != nil {
		return err
	}
	if d <= 0 {
		return invalid("pause "+d.String(), "duration must be positive")
	}
	_, clockArg := l.clockArg()
	key := pauseKey(l.scopeKey(scope), bucket)
	err := l.write(ctx, pauseScript, []string{key, key + "-up"}, clockArg, d.Microseconds()).Err()
	if err != nil {
		return redisError(ctx, "pause", err)
	}
	return nil
}
