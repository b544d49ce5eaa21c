package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	by        int64     // what set the instant; see reserve.lua
	charges   []Demand  // as asked for, to name what set the instant and to cancel
	seq       uint64    // with the limiter's prefix, the id of the entries written
	decided   time.Time // local time the reply arrived, to sleep from
	reply     any       // the script's reply, read again by RemainingOf

	mu        sync.Mutex // guards what follows
	units     []int64    // each charge's units as now written; nil: as asked
	cancelled bool
	cancelErr error
}

// OK reports whether the charges were admitted, now or at Time.
func (r *Reservation) OK() bool { return r.ok }

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

// RemainingOf returns the units left at the decision in the tightest of
// the limits of one bucket the reservation charged, after it when OK; -1
// for a bucket it did not charge.
func (r *Reservation) RemainingOf(bucket string) int64 {
	least, i := int64(-1), 0
	fast, _ := r.reply.(string) // read by readFast: the instant, then the sums
	list, _ := r.reply.([]any)
	for _, c := range r.charges {
		for _, lim := range c.Limits {
			room := int64(-1)
			if fast != "" {
				room = max(lim.Units-c.Units-fastField(fast, i+1), 0)
			} else if 5+i < len(list) {
				room, _ = list[5+i].(int64)
			}
			if c.Bucket == bucket && room >= 0 && (least < 0 || room < least) {
				least = room
			}
			i++
		}
	}
	return least
}

// Cancel gives the reserved units back, as if the call had never been
// admitted. Use it for a hold whose call will not be made, or for a call
// that provably never reached the upstream. Units a call did spend must not
// be given back: the upstream counted them. Cancel on a refusal, or a second
// Cancel, does nothing.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelled {
		return r.cancelErr
	}
	r.cancelled = true
	now, clockArg := r.lim.clockArg()
	var keys []string
	args := []any{clockArg, r.at}
	for i, c := range r.charges {
		units := r.currentUnits(i)
		for _, lim := range c.Limits {
			w := r.lim.window(r.scope, c.Bucket, lim)
			keys = append(keys, w.meta, w.log)
			span := r.lim.span(w, lim, &now)
			if lim.AsUpstream {
				span = cancelling(span.(string))
			}
			args = append(args, units, span)
		}
	}
	script, keys, args := r.fairUndo(cancelScript, keys, args, &now, func(i int) int64 { return -r.currentUnits(i) })
	if err := r.lim.write(ctx, script, keys, args...).Err(); err != nil && err != redis.Nil {
		r.cancelErr = redisError(ctx, "cancel", err)
	}
	return r.cancelErr
}

// Settle replaces the units the reservation charged bucket with what the
// call truly cost, e.g. the tokens a response reported where the charge
// was the request's max_tokens. The call then counts units, at the instant
// it was admitted, for exactly one window: a refund frees room at once for
// every process; an extra charge counts even if it takes a window over its
// limit, since the upstream spent it, and later calls wait it out. Settle
// a call that was made (Cancel one that was not); settle again to correct
// a settlement. It does nothing on a refusal or after Cancel, and fails
// with ErrInvalid for a bucket the reservation did not charge or units
// below zero or above MaxUnits. Settling costs one round trip; calls never
// settled cost nothing more.
func (r *Reservation) Settle(ctx context.Context, bucket string, units int64) error {
	return r.SettleAll(ctx, map[string]int64{bucket: units})
}

// SettleAll settles several buckets the reservation charged at once, in
// one round trip, e.g. an LLM call's input and output tokens read from its
// answer: units maps each bucket to what the call truly cost in it. Each
// bucket is settled as Settle settles it; buckets the reservation charged
// and units leaves out keep their units. It checks every bucket before
// writing anything: a bucket the reservation did not charge, or units
// below zero or above MaxUnits, fails with ErrInvalid and settles none. It
// does nothing on a refusal, after Cancel, or when no bucket's units
// change.
func (r *Reservation) SettleAll(ctx context.Context, units map[string]int64) error {
	return r.settle(ctx, settleScript, units)
}

// settle is SettleAll by script: settleScript, or in tests the same
// decision by other code.
func (r *Reservation) settle(ctx context.Context, settle *redis.Script, units map[string]int64) error {
	return r.settleFreeing(ctx, settle, units, nil)
}

// settleFreeing is settle that, when it writes, frees slots in the same
// round trip (SettleAndRelease).
func (r *Reservation) settleFreeing(ctx context.Context, settle *redis.Script, units map[string]int64, slots []*Slot) error {
	for bucket, n := range units {
		if n < 0 || n > MaxUnits {
			return invalid(fmt.Sprintf("settlement of %d units for bucket %q", n, bucket), "units must be between 0 and MaxUnits")
		}
		if !slices.ContainsFunc(r.charges, func(c Demand) bool { return c.Bucket == bucket }) {
			return invalid(fmt.Sprintf("settlement for bucket %q", bucket), "the reservation charged no such bucket")
		}
	}
	if !r.ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelled {
		return nil
	}
	// Each changed charge's difference, in the charges' order (the first
	// charge of a bucket named twice is the one settled, as ever).
	deltas := make([]int64, len(r.charges))
	changed := false
	for bucket, n := range units {
		i := slices.IndexFunc(r.charges, func(c Demand) bool { return c.Bucket == bucket })
		deltas[i] = n - r.currentUnits(i)
		changed = changed || deltas[i] != 0
	}
	if !changed {
		return nil
	}
	now, clockArg := r.lim.clockArg()
	// KEYS: the metas, then the logs (settle.lua's), the logs left out
	// when every window is a token bucket's (withoutBucketLogs).
	n := 0
	for i, c := range r.charges {
		if deltas[i] != 0 {
			n += len(c.Limits)
		}
	}
	keys := make([]string, 2*n)
	args := make([]any, 0, 2+2*n)
	args = append(args, clockArg, r.at)
	j := 0
	for i, c := range r.charges {
		if deltas[i] == 0 {
			continue
		}
		for _, lim := range c.Limits {
			w := r.lim.window(r.scope, c.Bucket, lim)
			keys[j], keys[n+j] = w.meta, w.log
			j++
			args = append(args, deltas[i], r.lim.span(w, lim, &now))
		}
	}
	keys = withoutBucketLogs(keys, r.charges)
	script, keys, args := r.fairUndo(settle, keys, args, &now, func(j int) int64 { return deltas[j] })
	if err := r.lim.runFreeing(ctx, script, keys, args, slots); err != nil {
		return redisError(ctx, "settle", err) // nothing was written: the entries keep their units
	}
	if r.units == nil {
		r.units = make([]int64, len(r.charges))
		for j, c := range r.charges {
			r.units[j] = c.Units
		}
	}
	for i, d := range deltas {
		r.units[i] += d
	}
	return nil
}

// currentUnits returns the units the i-th charge's entries hold now. The caller
// holds r.mu.
func (r *Reservation) currentUnits(i int) int64 {
	if r.units != nil {
		return r.units[i]
	}
	return r.charges[i].Units
}

// Wait sleeps until the reservation is due: Delay after the moment its reply
// arrived, which is never earlier than the admission instant on the
// decision's clock. When ctx ends first it gives the units back (Cancel) and
// returns ctx.Err(). It returns at once for a refusal.
func (r *Reservation) Wait(ctx context.Context) error {
	if !r.ok {
		return nil
	}
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

// A Constraint is what set a reservation's instant later than its decision.
type Constraint struct {
	// Bucket is the bucket whose limit or pause did, e.g. "search"; empty
	// for a pause of the whole scope.
	Bucket string
	// Limit is the limit that had no room sooner; zero for a pause.
	Limit Limit
	// Paused reports a pause (see Limiter.Pause and PauseBecause), an
	// upstream's or an operator's: PauseOf says whose, and why.
	Paused bool
}

// Constraint returns what set the reservation's instant (the admission of a
// hold, or the RetryAfter of a refusal), and false when nothing did: an
// immediate admission, or a hold placed behind others waiting.
func (r *Reservation) Constraint() (Constraint, bool) {
	switch {
	case r.by > 0:
		i := int(r.by)
		for _, c := range r.charges {
			if i <= len(c.Limits) {
				return Constraint{Bucket: c.Bucket, Limit: c.Limits[i-1]}, true
			}
			i -= len(c.Limits)
		}
	case r.by < 0 && int(-r.by) <= len(r.charges):
		return Constraint{Bucket: r.charges[-r.by-1].Bucket, Paused: true}, true
	case r.by < 0:
		return Constraint{Paused: true}, true // the scope's own pause
	}
	return Constraint{}, false
}

// readFast reads fast.lua's reply, now and each window's sum as it was
// before this call, 8 bytes each (big-endian): admitted at now.
func (r *Reservation) readFast(reply string) error {
	n := 0
	for _, c := range r.charges {
		n += len(c.Limits)
	}
	if len(reply) != 8*(n+1) {
		return errReply([]byte(reply))
	}
	now := fastField(reply, 0)
	r.ok, r.now, r.at, r.remaining = true, now, now, MaxUnits
	i := 1
	for _, c := range r.charges {
		for _, lim := range c.Limits {
			r.remaining = min(r.remaining, lim.Units-c.Units-fastField(reply, i))
			i++
		}
	}
	r.remaining = max(r.remaining, 0)
	return nil
}

// fastField returns the i-th field of fast.lua's reply, which readFast
// checked.
func fastField(reply string, i int) int64 {
	var v uint64
	for _, b := range []byte(reply[8*i : 8*i+8]) {
		v = v<<8 | uint64(b)
	}
	return int64(v)
}

// readDecision reads reserve.lua's reply, {admitted, now, at, remaining, by,
// room_1, ...}; RemainingOf reads the rooms.
func (r *Reservation) readDecision(reply any) error {
	var v [5]int64
	list, _ := reply.([]any)
	if len(list) < len(v) {
		return errReply(reply)
	}
	for i, x := range list[:len(v)] {
		var ok bool
		if v[i], ok = x.(int64); !ok {
			return errReply(reply)
		}
	}
	r.ok, r.now, r.at, r.remaining, r.by = v[0] == 1, v[1], v[2], v[3], v[4]
	return nil
}

// errReply describes a reply of the wrong shape.
func errReply(v any) error { return fmt.Errorf("unexpected reply %v", v) }
