package quota

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed cancel.lua
var cancelSource string

var cancelScript = redis.NewScript(cancelSource)

// A Reservation is the limiter's answer to one decision: admitted at an
// instant (now or later), or refused with the time after which the cost
// would fit. Instants are read on the clock the decision used: the Redis
// server's, unless WithClock was given.
//
// A Reservation's methods are safe for concurrent use.
type Reservation struct {
	lim       *Limiter
	scope     string
	ok        bool
	now, at   int64     // µs: the decision's instant and the admission instant
	remaining int64     // smallest room left among the limits, in units
	decided   time.Time // local time the reply arrived, to sleep from
	entries   []entry   // what was recorded, for Cancel

	cancelOnce sync.Once
	cancelErr  error
}

// entry is one log entry a reservation wrote.
type entry struct {
	log, meta string
	cost      int64
	member    string
}

// OK reports whether the charges were admitted, now or at Time.
func (r *Reservation) OK() bool { return r.ok }

// Scope returns the scope the reservation was made in.
func (r *Reservation) Scope() string { return r.scope }

// Time returns the instant the charges count from when OK, e.g. now for an
// immediate admission, or 12:00:03.25 for a hold; when not OK, the earliest
// instant they would fit.
func (r *Reservation) Time() time.Time { return time.UnixMicro(r.at) }

// Decided returns the instant the decision was made, on the same clock as Time.
func (r *Reservation) Decided() time.Time { return time.UnixMicro(r.now) }

// Delay returns how long after the decision the caller must wait before
// acting: 0 for an immediate admission, e.g. 3.25s for a hold.
func (r *Reservation) Delay() time.Duration {
	if !r.ok {
		return 0
	}
	return time.Duration(r.at-r.now) * time.Microsecond
}

// RetryAfter returns, for a refusal, how long after the decision the cost
// would fit given what was recorded then, e.g. 41.2s; 0 when OK.
func (r *Reservation) RetryAfter() time.Duration {
	if r.ok {
		return 0
	}
	return time.Duration(r.at-r.now) * time.Microsecond
}

// Remaining returns the units left at the decision in the tightest of the
// limits, after this reservation when OK, e.g. 9399 of 9500.
func (r *Reservation) Remaining() int64 { return r.remaining }

// Costs returns the units recorded per bucket window, in the order the
// charges and limits were given; empty when not OK.
func (r *Reservation) Costs() []int64 {
	out := make([]int64, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.cost
	}
	return out
}

// Cancel gives the reserved units back, as if the call had never been
// admitted. Use it for a hold whose call will not be made, or for a call
// that provably never reached the upstream. Units a call did spend must not
// be given back: the upstream counted them. Cancel on a refusal, or a second
// Cancel, does nothing.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.ok || len(r.entries) == 0 {
		return nil
	}
	r.cancelOnce.Do(func() {
		keys := make([]string, 0, 2*len(r.entries))
		args := make([]any, 0, len(r.entries))
		for _, e := range r.entries {
			keys = append(keys, e.log, e.meta)
			args = append(args, e.member)
		}
		if err := cancelScript.Run(ctx, r.lim.client, keys, args...).Err(); err != nil && err != redis.Nil {
			r.cancelErr = &RedisError{Op: "cancel", Err: err}
		}
	})
	return r.cancelErr
}

// wait sleeps until the reservation is due, measured from the moment its
// reply arrived, which is never earlier than the admission instant. When ctx
// ends first it cancels the hold and returns ctx.Err().
func (r *Reservation) wait(ctx context.Context) error {
	d := r.Delay() - time.Since(r.decided)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		// The hold is given back; if Redis cannot be told, it expires with its window.
		return errors.Join(ctx.Err(), r.Cancel(cctx))
	}
}

// errReply describes a reply of the wrong shape.
func errReply(v any) error { return fmt.Errorf("unexpected reply %v", v) }
