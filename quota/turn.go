package quota

import (
	"context"
	"errors"
	"time"
)

// takeTurn waits for a call's turn in a waiting room (room.lua) whose
// queue key is channel, up to maxWait µs (unbounded: no bound but ctx's),
// and returns its reservation: admitted now, refused, or decided without
// entering the room. run decides once, renewing the place in the room, and
// returns the place (from 0; -1 when the call is not in the room); leave
// takes the call out of the room. The first in the room sleeps until the
// instant its call would fit, the others until the one before them
// leaves (a message on channel naming the next), and every waiter looks
// again within SlotRenewal, which keeps its place.
func (l *Limiter) takeTurn(ctx context.Context, channel, id string, maxWait int64, run func(context.Context) (*Reservation, int64, error), leave func()) (*Reservation, error) {
	deadline := time.Time{}
	if maxWait < unbounded {
		deadline = time.Now().Add(time.Duration(maxWait) * time.Microsecond)
	}
	bell := l.watchers.watch(l, channel, id)
	defer l.watchers.unwatch(channel, id)
	for {
		r, place, err := run(ctx)
		if err != nil || r.ok || place < 0 {
			if err != nil {
				leave()
			}
			return r, err
		}
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
