package quota

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// A Lease is a block of units of one bucket, taken from a scope's quota in
// one decision, for one process to spend call by call without asking
// Redis: for a hot scope, one round trip per lease instead of one per call.
//
// The units a lease holds count in every window from the moment it is taken
// until a full window after its end (after End, when it ends early, for
// what was spent), so nothing spent from it can reach the upstream in a
// window over the limit. Unlike a hold, it does not make later callers
// queue behind its end: they see only its units taken. A lease never
// outlives the calendar day it was taken in.
//
// On a token bucket a lease counts its units at once and, while it runs,
// the refill its remaining term would bring as well, since its units may
// reach the upstream at any instant of its term (see lease.lua): the
// bucket's guarantee holds whenever they are spent. Its term is at most
// the time the bucket takes to refill its capacity. End gives back what
// was not spent, and the term left, as a refund is given back.
//
// A Lease is safe for concurrent use.
type Lease struct {
	lim      *Limiter
	scope    string
	charge   Demand // Units: the units asked for
	id       string
	granted  int64
	at, ends int64     // the grant and the end on the server's clock, µs (lease.lua)
	deadline time.Time // local time after which nothing may be spent

	mu     sync.Mutex
	left   int64
	ended  bool
	endErr error
}

// Lease takes up to c.Units units of c.Bucket in scope, under c.Limits, to
// be spent until d has passed. It grants what fits now, and only when no
// hold waits: a lease does not jump the queue. When nothing can be
// granted it returns a *RefusedError with the time after which a unit
// might fit. End the lease when done, to give back what was not spent.
func (l *Limiter) Lease(ctx context.Context, scope string, c Demand, d time.Duration) (*Lease, error) {
	if err := l.check(scope); err != nil {
		return nil, err
	}
	if d <= 0 {
		return nil, invalid("lease duration "+d.String(), "must be positive")
	}
	if c.Units <= 0 || c.Units > MaxUnits {
		return nil, invalid("lease of "+strconv.FormatInt(c.Units, 10)+" units", "must be between 1 and MaxUnits")
	}
	if len(c.Limits) == 0 {
		return nil, invalid("lease for bucket "+strconv.Quote(c.Bucket), "no limits")
	}
	if err := c.validateFair(); err != nil {
		return nil, err
	}
	for j, lim := range c.Limits {
		if err := lim.Validate(); err != nil {
			return nil, err
		}
		if lim.AsUpstream {
			// Its refunds fill the bucket as the upstream's, which a
			// lease's term reserved ahead would not keep (bucket.lua).
			return nil, invalid("lease on "+lim.String(), "a token bucket that refunds as its upstream takes no lease")
		}
		if duplicateWindow([]Demand{c}, 0, j) {
			return nil, invalid("lease", "bucket "+strconv.Quote(c.Bucket)+" names window "+lim.windowKey()+" twice")
		}
	}
	ls := &Lease{lim: l, scope: scope, charge: c, id: l.idPrefix + "L" + strconv.FormatUint(l.seq.Add(1), 36)}
	start := time.Now()
	v, err := l.runLease(ctx, ls, "take", c.Units, d)
	if err != nil {
		return nil, err
	}
	if len(v) != 3 {
		return nil, &RedisError{Op: "lease", Err: errReply(v)}
	}
	if v[0] <= 0 {
		return nil, &RefusedError{Scope: scope, RetryAfter: time.Duration(v[2]-v[1]) * time.Microsecond}
	}
	ls.granted, ls.left = v[0], v[0]
	ls.at, ls.ends = v[1], v[2]
	// Spending stops by the lease's end on the server's clock: the request
	// left before the server read its clock, so start is no later.
	ls.deadline = start.Add(time.Duration(v[2]-v[1]) * time.Microsecond)
	return ls, nil
}

// runLease runs lease.lua for the lease's windows.
func (l *Limiter) runLease(ctx context.Context, ls *Lease, op string, units int64, d time.Duration) ([]int64, error) {
	now, clockArg := l.clockArg()
	c := ls.charge
	keys := make([]string, 0, 2*len(c.Limits)+2)
	logs := make([]string, 0, len(c.Limits))
	args := []any{clockArg, op, ls.id, units, d.Microseconds(), ls.at, ls.ends, ls.granted}
	var w *window
	for _, lim := range c.Limits {
		w = l.window(ls.scope, c.Bucket, lim)
		keys = append(keys, w.meta)
		logs = append(logs, w.log)
		args = append(args, w.units, l.span(w, lim, &now))
	}
	keys = append(keys, w.pause, w.scopePause)
	keys = append(keys, logs...)
	script, keys, args := l.fairLease(c, keys, args) // from the tenant's part, with a pace or shares
	v, err := l.write(ctx, script, keys, args...).Int64Slice()
	if err != nil {
		return nil, redisError(ctx, "lease", err)
	}
	return v, nil
}

// Granted returns the units the lease was granted, e.g. 500.
func (ls *Lease) Granted() int64 { return ls.granted }

// Deadline returns the local time after which nothing may be spent from
// the lease.
func (ls *Lease) Deadline() time.Time { return ls.deadline }

// Take spends n units from the lease, when it holds them and has not
// reached its deadline or been ended; otherwise it spends nothing and
// reports false.
func (ls *Lease) Take(n int64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ended || n <= 0 || n > ls.left || !time.Now().Before(ls.deadline) {
		return false
	}
	ls.left -= n
	return true
}

// End stops the lease and gives back in Redis the units it did not spend;
// the ones it spent stay counted a window after now. Only the first call
// does anything. A lease never ended still ends by itself, its units all
// counted a window after its deadline.
func (ls *Lease) End(ctx context.Context) error {
	ls.mu.Lock()
	if ls.ended {
		err := ls.endErr
		ls.mu.Unlock()
		return err
	}
	ls.ended = true
	spent := ls.granted - ls.left
	ls.mu.Unlock()
	_, err := ls.lim.runLease(ctx, ls, "end", spent, time.Microsecond)
	ls.mu.Lock()
	ls.endErr = err
	ls.mu.Unlock()
	return err
}
