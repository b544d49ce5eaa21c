package tollgate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// ledger keeps the units spent while Redis could not be reached (sent
// unmetered, or decided by the FailLocal mode's limiter), to record them
// there once it answers again, so that the shared count includes them.
type ledger struct {
	mu   sync.Mutex
	debt map[debtKey]int64
}

type debtKey struct{ scope, bucket string }

// add notes units spent without Redis.
func (l *ledger) add(scope string, charges []costs.Charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.debt == nil {
		l.debt = make(map[debtKey]int64)
	}
	for _, ch := range charges {
		l.debt[debtKey{scope, ch.Bucket}] += ch.Units
	}
}

// settle records the debt on d. A bucket's debt is capped at its smallest
// limit: beyond that the window is full either way. What cannot be
// recorded now stays owed, and log hears of it.
func (l *ledger) settle(ctx context.Context, d *decider, log func(context.Context, slog.Level, string, ...slog.Attr)) {
	l.mu.Lock()
	debt := l.debt
	l.debt = nil
	l.mu.Unlock()
	if len(debt) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for k, units := range debt {
		limits := usable(d.limits[k.bucket])
		if len(limits) == 0 {
			continue // a limit still to be learned: nothing to record it in
		}
		for _, lim := range limits {
			units = min(units, lim.Units)
		}
		if err := d.lim.Record(cctx, k.scope, quota.Charge{Bucket: k.bucket, Units: units, Limits: limits}); err != nil {
			l.add(k.scope, []costs.Charge{{Bucket: k.bucket, Units: units}})
			log(ctx, slog.LevelWarn, "tollgate: could not record units spent during the outage",
				slog.String("scope", k.scope), slog.String("bucket", k.bucket), slog.Any("err", err))
		}
	}
}
