package quota

import (
	"context"
	"time"
)

// Activity is what is under way in one bucket of a scope at one instant:
// for status displays, beside Usage. Instants are on the limiter's clock.
type Activity struct {
	// Now is the instant it was read at.
	Now time.Time
	// Leases is the leases out on the bucket (see Lease): taken and not
	// yet at their end, e.g. 3.
	Leases int
	// Leased is the units those leases were granted, spent or not, e.g. 600.
	Leased int64
	// LeasedUntil is when the last of them ends; zero when none is out.
	LeasedUntil time.Time
	// InFlight is the slots of the bucket's cap held (see TakeSlot), e.g. 12.
	InFlight int
	// SlotWaiters is the callers waiting for a slot, e.g. 2.
	SlotWaiters int
	// BackgroundWaiters is the background callers waiting their turn in
	// the bucket's scope (see WithPriority), e.g. 5.
	BackgroundWaiters int
}

// Activity reads, writing nothing, what is under way in a bucket of
// scope: the leases out (as limit's window records them: every window of
// a bucket records the same leases), slots held and callers waiting.
func (l *Limiter) Activity(ctx context.Context, scope, bucket string, limit Limit) (Activity, error) {
	if err := l.check(scope); err != nil {
		return Activity{}, err
	}
	if err := limit.Validate(); err != nil {
		return Activity{}, err
	}
	w := l.window(scope, bucket, limit)
	slots := l.slotKeys(slotKey{scope, bucket})
	room := l.backgroundKeys(scope)
	now, clockArg := l.clockArg()
	keys := []string{w.log, w.meta, slots[0], slots[2], room[1]}
	v, err := inspectScript.Run(ctx, l.client, keys, clockArg, l.span(w, limit, &now)).Int64Slice()
	if err != nil {
		return Activity{}, redisError(ctx, "activity", err)
	}
	if len(v) != 7 {
		return Activity{}, &RedisError{Op: "activity", Err: errReply(v)}
	}
	return Activity{
		Now: time.UnixMicro(v[0]), Leases: int(v[1]), Leased: v[2], LeasedUntil: instant(v[3]),
		InFlight: int(v[4]), SlotWaiters: int(v[5]), BackgroundWaiters: int(v[6]),
	}, nil
}
