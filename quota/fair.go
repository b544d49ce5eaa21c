package quota

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// validateFair checks a demand's pace and shares.
func (c Demand) validateFair() error {
	if err := c.Pace.validate(c.Bucket); err != nil {
		return err
	}
	if err := c.Shares.validate(c.Bucket); err != nil {
		return err
	}
	if c.Shares != nil && c.Tenant == "" {
		return invalid(fmt.Sprintf("charge for bucket %q", c.Bucket), "shares need a tenant")
	}
	return nil
}

// isFair reports whether a charge has a pace or shares, which the fair
// scripts decide.
func isFair(charges []Demand) bool {
	for _, c := range charges {
		if c.Pace != nil || c.Shares != nil {
			return true
		}
	}
	return false
}

// checkTenants reports charges with shares that name different tenants:
// a decision is one tenant's.
func checkTenants(charges []Demand) error {
	tenant := tenantOf(charges)
	for _, c := range charges {
		if c.Shares != nil && c.Tenant != tenant {
			return invalid("charges", fmt.Sprintf("tenants %q and %q in one decision", tenant, c.Tenant))
		}
	}
	return nil
}

// tenantOf returns the tenant of charges with shares.
func tenantOf(charges []Demand) string {
	for _, c := range charges {
		if c.Shares != nil {
			return c.Tenant
		}
	}
	return ""
}

// fairRoomKeys are the keys of the waiting room of a bucket with shares
// or a pace (fairroom.lua): queue, alive, counter, who.
func (l *Limiter) fairRoomKeys(scope, bucket string) []string {
	base := l.scopeKey(scope) + keyPart(bucket) + ":fair"
	return []string{base, base + ":alive", base + ":n", base + ":who"}
}

// fairBucket returns the bucket whose room a decision on charges with a
// pace or shares waits in: the first with shares, else the first paced.
func fairBucket(charges []Demand) string {
	for _, c := range charges {
		if c.Shares != nil {
			return c.Bucket
		}
	}
	for _, c := range charges {
		if c.Pace != nil {
			return c.Bucket
		}
	}
	return charges[0].Bucket
}

// fairReserve decides charges with a pace or shares (fairreserve.lua).
// A call that may not hold (a tenant at or above its share, a background
// call) waits its turn in the bucket's room up to maxWait, as a
// background call waits in the scope's (takeTurn).
func (l *Limiter) fairReserve(ctx context.Context, scope string, maxWait int64, charges []Demand) (*Reservation, error) {
	if err := checkTenants(charges); err != nil {
		return nil, err
	}
	keys, args, seq, err := l.decision(scope, maxWait, charges, false)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range charges {
		n += len(c.Limits)
	}
	for i := range n {
		keys = append(keys, tenantsKey(keys[i]))
	}
	room := l.fairRoomKeys(scope, fairBucket(charges))
	keys = append(keys, room...)
	var specs []*Shares
	for _, c := range charges {
		k := 0
		if c.Shares != nil {
			if k = slices.Index(specs, c.Shares) + 1; k == 0 {
				specs = append(specs, c.Shares)
				k = len(specs)
			}
		}
		for _, lim := range c.Limits {
			burst := ""
			if c.Pace != nil {
				burst = strconv.FormatInt(c.Pace.burstUnits(lim.Units), 10)
			}
			args = append(args, burst, k)
		}
	}
	args = append(args, tenantOf(charges), len(specs))
	for _, s := range specs {
		args = s.args(args)
	}
	// The room's: how long a place lasts ('' for a call that never waits
	// there, '0' to decide once), the waiter (fairroom.lua's name), its
	// class.
	wait, class, mark := "", "", ":i"
	if priorityOf(ctx) == Background {
		wait, class, mark = "0", "background", ":b"
	} else if len(specs) > 0 {
		wait = "0"
	}
	if wait != "" && maxWait != 0 {
		wait = strconv.FormatInt(SlotTTL.Microseconds(), 10)
	}
	id := l.entryID(seq) + mark + tenantOf(charges)
	args = append(args, wait, id, class)

	leave := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		out := slices.Clone(args)
		out[len(out)-3] = "leave"
		_, _ = l.write(cctx, fairScript, keys, out...).Result()
	}
	reply, late, err := l.runScript(ctx, fairScript, keys, args)
	if late != nil {
		// The caller gave up while the decision was on its way: give back
		// what it admits, or the place it took in the room, which would
		// keep the others waiting until it expires.
		go func() {
			<-late.done
			r, place, err := l.fairReservation(scope, charges, seq, late.reply)
			switch {
			case err != nil:
			case r.ok:
				_ = r.Cancel(context.Background())
			case place >= 0:
				leave()
			}
		}()
	}
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	r, place, err := l.fairReservation(scope, charges, seq, reply)
	if err != nil || place < 0 {
		return r, err
	}
	// In the room: wait for the turn there.
	run := func(ctx context.Context) (*Reservation, int64, error) {
		_, args[0] = l.clockArg()
		reply, err := l.write(ctx, fairScript, keys, args...).Result()
		if err != nil {
			return nil, 0, redisError(ctx, "reserve", err)
		}
		return l.fairReservation(scope, charges, seq, reply)
	}
	return l.takeTurn(ctx, room[0], id, maxWait, run, leave)
}

// fairReservation reads fairreserve.lua's reply: reserve.lua's list, then
// the place in the room (-1: not in it).
func (l *Limiter) fairReservation(scope string, charges []Demand, seq uint64, reply any) (*Reservation, int64, error) {
	list, _ := reply.([]any)
	if len(list) < 6 {
		return nil, 0, &RedisError{Op: "reserve", Err: errReply(reply)}
	}
	place, ok := list[len(list)-1].(int64)
	if !ok {
		return nil, 0, &RedisError{Op: "reserve", Err: errReply(reply)}
	}
	r, err := l.reservation(scope, charges, seq, list[:len(list)-1])
	if err == nil && r.ok && r.at > r.now {
		r.decided = time.Now() // a hold: Wait sleeps from here
	}
	return r, place, err
}
