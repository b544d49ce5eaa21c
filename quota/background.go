package quota

import (
	"context"
	"errors"
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
	leave := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = l.write(cctx, backgroundScript, keys, append([]any{args[0], "leave"}, args[2:]...)...).Result()
	}
	if maxWait == 0 {
		r, _, err := run(ctx, 0)
		return r, err
	}
	deadline := time.Time{}
	if maxWait < unbounded {
		deadline = time.Now().Add(time.Duration(maxWait) * time.Microsecond)
	}
	bell := l.watchers.watch(l, room[0], l.entryID(seq))
	defer l.watchers.unwatch(room[0], l.entryID(seq))
	for {
		r, place, err := run(ctx, SlotTTL.Microseconds())
		if err != nil || r.ok {
			if err != nil {
				leave()
			}
			return r, err
		}
		// First in the room: sleep until the call would fit; behind
		// others: until the one before is admitted. Either way look again
		// within SlotRenewal, which keeps the place in the room.
		nap := SlotRenewal
		if place == 0 {
			nap = min(nap, max(time.Duration(r.at-r.now)*time.Microsecond, time.Millisecond))
			if !deadline.IsZero() && time.Now().Add(time.Duration(r.at-r.now)*time.Microsecond).After(deadline) {
				leave()
				return r, nil // refused: its instant lies beyond maxWait
			}
		}
		timer := time.NewTimer(nap)
		var expired <-chan time.Time
		if !deadline.IsZero() {
			expired = time.After(time.Until(deadline))
		}
		select {
		case <-bell:
		case <-timer.C:
		case <-expired:
			timer.Stop()
			leave()
			return r, nil
		case <-ctx.Done():
			timer.Stop()
			leave()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && callerDeadline(ctx) {
				return r, nil
			}
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// callerDeadline reports whether ctx ended at its deadline.
func callerDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
