package quota

import (
	"context"
)

// Record writes the units of demands spent without the limiter's say, e.g.
// while Redis could not be reached, or by a program outside tollgate, so
// that they count from now on in every window. It checks no limit: the
// units are spent already, and the limits may end up over-full, which
// later callers then wait out. The entries are dated now, or after the
// newest hold, so they count at least as long as the spending they stand
// for.
func (l *Limiter) Record(ctx context.Context, scope string, demands ...Demand) error {
	n, err := l.checkCharges(scope, demands)
	if err != nil {
		return err
	}
	now, clockArg := l.clockArg()
	keys := make([]string, 0, 2*n)
	logs := make([]string, 0, n)
	args := make([]any, 0, 1+2*n)
	args = append(args, clockArg)
	for _, c := range demands {
		for _, lim := range c.Limits {
			w := l.window(scope, c.Bucket, lim)
			keys = append(keys, w.meta)
			logs = append(logs, w.log)
			args = append(args, c.Units, l.span(w, lim, &now))
		}
	}
	keys = append(keys, logs...)
	if err := l.write(ctx, recordScript, keys, args...).Err(); err != nil {
		return redisError(ctx, "record", err)
	}
	return nil
}
