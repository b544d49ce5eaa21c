package quota

import (
	"context"
	"time"
)

// Background decisions. A background call (WithPriority) never takes a
// hold in the log: were it to reserve a later instant, an interactive call
// arriving after it could not be admitted before it. It waits instead in
// its scope's background room, in arrival order across processes; the
// first in the room is admitted as soon as every limit has room now and no
// interactive hold waits, sleeping meanwhile until the instant it would
// fit, and the others sleep until the one before them is admitted.

// backgroundKeys are the keys of a scope's background room.
func (l *Limiter) backgroundKeys(scope string) []string {
	base := l.scopeKey(scope) + "background"
	return []string{base, base + ":alive", base + ":n"}
}

// background decides a background call, waiting its turn up to maxWait µs
// (0: decide once; unbounded: no bound but ctx's). The reservation it
// returns is admitted now, or refused.
func (l *Limiter) background(ctx context.Context, scope string, maxWait int64, charges []Demand) (*Reservation, error) {
	keys, args, seq, err := l.decision(scope, 0, charges, true)
	if err != nil {
		return nil, err
	}
	room := l.backgroundKeys(scope)
	keys = append(keys, room...)
	run := func(ctx context.Context, wait any) (*Reservation, int64, error) {
		_, args[0] = l.clockArg()
		args[1] = wait
		reply, err := l.write(ctx, backgroundScript, keys, args...).Result()
		if err != nil {
			return nil, 0, redisError(ctx, "reserve", err)
		}
		list, _ := reply.([]any)
		if len(list) < 6 {
			return nil, 0, &RedisError{Op: "reserve", Err: errReply(reply)}
		}
		place, _ := list[5].(int64)
		r, err := l.reservation(scope, charges, seq, append(list[:5:5], list[6:]...))
		return r, place, err
	}
	if maxWait == 0 {
		r, _, err := run(ctx, 0)
		return r, err
	}
	leave := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = l.write(cctx, backgroundScript, keys, append([]any{args[0], "leave"}, args[2:]...)...).Result()
	}
	return l.takeTurn(ctx, room[0], l.entryID(seq), maxWait, func(ctx context.Context) (*Reservation, int64, error) {
		return run(ctx, SlotTTL.Microseconds())
	}, leave)
}

// callerDeadline reports whether ctx ended at its deadline.
func callerDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
