package quota

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// decide runs a reserve script (reserveScript, fairScript) on keys and
// args and returns the reservation its reply makes, its entries named by
// seq.
func (l *Limiter) decide(ctx context.Context, script *redis.Script, scope string, charges []Demand, seq uint64, keys []string, args []any) (*Reservation, error) {
	reply, late, err := l.runScript(ctx, script, keys, args)
	l.giveBackLate(late, scope, charges, seq, nil)
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	return l.decided(scope, charges, seq, reply)
}

// giveBackLate gives back, when it comes, what a decision whose caller
// gave up while it was on its way admits (its units, and slots taken with
// them), so that nothing goes to a call never made. late is runScript's.
func (l *Limiter) giveBackLate(late *decision, scope string, charges []Demand, seq uint64, slots []*Slot) {
	if late == nil {
		return
	}
	go func() {
		<-late.done
		if r, err := l.reservation(scope, charges, seq, late.reply); err == nil && r.ok {
			_ = r.Cancel(context.Background())
			for _, s := range slots {
				_ = s.Release(context.Background())
			}
		}
	}()
}

// decided reads a decision's reply into its reservation.
func (l *Limiter) decided(scope string, charges []Demand, seq uint64, reply any) (*Reservation, error) {
	r, err := l.reservation(scope, charges, seq, reply)
	if err != nil {
		return nil, err
	}
	if r.ok && r.at > r.now {
		r.decided = time.Now() // a hold: Wait sleeps from here
	}
	return r, nil
}

// reservation reads the reserve script's reply: fast.lua's string or
// reserve.lua's list.
func (l *Limiter) reservation(scope string, charges []Demand, seq uint64, reply any) (*Reservation, error) {
	r := &Reservation{lim: l, scope: scope, charges: charges, seq: seq, reply: reply}
	var err error
	if fast, ok := reply.(string); ok {
		err = r.readFast(fast)
	} else {
		err = r.readDecision(reply)
	}
	if err != nil {
		return nil, &RedisError{Op: "reserve", Err: err}
	}
	return r, nil
}
