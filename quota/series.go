package quota

import (
	"context"
	"slices"
	"time"

	"github.com/tollgate/tollgate/quota/internal/access"
)

// series is ops.Operator.Series: it reads, writing nothing, one limit's
// usage in a bucket of scope and the slices counted in its window at the
// same instant, oldest first. A token bucket keeps no log: its usage
// alone.
func (l *Limiter) series(ctx context.Context, scope, bucket string, limit Limit) (access.Series, error) {
	if limit.refilling() {
		u, err := l.Usage(ctx, scope, bucket, limit)
		if err != nil {
			return access.Series{}, err
		}
		return access.Series{Now: u.Now, Used: u.Used, Held: u.Held, NextFree: u.NextFree, Reset: u.Reset, PausedUntil: u.PausedUntil}, nil
	}
	if err := l.check(scope); err != nil {
		return access.Series{}, err
	}
	if err := limit.Validate(); err != nil {
		return access.Series{}, err
	}
	w := l.window(scope, bucket, limit)
	now, clockArg := l.clockArg()
	keys := []string{w.log, w.meta, w.pause, w.scopePause}
	v, err := seriesScript.Run(ctx, l.client, keys, clockArg, l.span(w, limit, &now)).Int64Slice()
	if err != nil {
		return access.Series{}, redisError(ctx, "series", err)
	}
	if len(v) < 6 || len(v)%2 != 0 {
		return access.Series{}, &RedisError{Op: "series", Err: errReply(v)}
	}
	s := access.Series{Now: time.UnixMicro(v[0]), Used: v[1], Held: v[2], NextFree: instant(v[3]), Reset: instant(v[4])}
	if v[5] > v[0] {
		s.PausedUntil = time.UnixMicro(v[5])
	}
	if n := (len(v) - 6) / 2; n > 0 {
		s.Slices = make([]access.Slice, n)
		for i := range n {
			s.Slices[i] = access.Slice{At: time.UnixMicro(v[6+2*i]), Units: v[7+2*i]}
		}
		// The leases follow the log, each dated at its end.
		slices.SortStableFunc(s.Slices, func(a, b access.Slice) int { return a.At.Compare(b.At) })
	}
	return s, nil
}
