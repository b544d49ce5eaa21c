package quota

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/quota/internal/access"
)

// activity is ops.Operator.Activity: it reads, writing nothing, what is
// under way in a bucket of scope: the leases out (as limit's window records them: every window of
// a bucket records the same leases), slots held and callers waiting.
func (l *Limiter) activity(ctx context.Context, scope, bucket string, limit Limit) (access.Activity, error) {
	if err := l.check(scope); err != nil {
		return access.Activity{}, err
	}
	if err := limit.Validate(); err != nil {
		return access.Activity{}, err
	}
	w := l.window(scope, bucket, limit)
	slots := l.slotKeys(slotKey{scope, bucket})
	room := l.backgroundKeys(scope)
	now, clockArg := l.clockArg()
	keys := []string{w.log, w.meta, slots[0], slots[2], room[1]}
	v, err := inspectScript.Run(ctx, l.client, keys, clockArg, l.span(w, limit, &now)).Int64Slice()
	if err != nil {
		return access.Activity{}, redisError(ctx, "activity", err)
	}
	if len(v) != 7 {
		return access.Activity{}, &RedisError{Op: "activity", Err: errReply(v)}
	}
	return access.Activity{
		Now: time.UnixMicro(v[0]), Leases: int(v[1]), Leased: v[2], LeasedUntil: instant(v[3]),
		InFlight: int(v[4]), SlotWaiters: int(v[5]), BackgroundWaiters: int(v[6]),
	}, nil
}
