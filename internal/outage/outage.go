// Package outage tells whether Redis answers, and keeps what is spent while
// it does not.
//
// While Redis answers, every decision goes to it. When a decision fails for
// want of Redis, its user switches to its outage modes (Probe.Fail), and
// from then on one request every ProbeInterval first checks whether Redis
// answers again (Probe.Due); the others go straight to their outage mode,
// so an outage costs them no time: they do not wait for the probe. There
// is no background goroutine: nothing runs between requests. The units
// spent meanwhile (sent unmetered, or decided by an in-process limiter)
// are kept in a Ledger, to be recorded in Redis once it answers again.
package outage

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// ProbeInterval is how often a request checks whether Redis answers again;
// ProbeTimeout bounds the check.
const (
	ProbeInterval = 250 * time.Millisecond
	ProbeTimeout  = 500 * time.Millisecond
)

// Probe tracks whether Redis answers. The zero value is up; it is safe for
// concurrent use.
type Probe struct {
	down atomic.Bool
	next atomic.Int64 // unix ns after which a request may probe
	err  atomic.Pointer[error]
}

// Down reports whether Redis is taken to be down.
func (p *Probe) Down() bool { return p.down.Load() }

// Due reports whether a request at now should probe Redis: only while it
// is down, and only the one request that wins the slot.
func (p *Probe) Due(now time.Time) bool {
	next := p.next.Load()
	return now.UnixNano() >= next && p.next.CompareAndSwap(next, now.Add(ProbeInterval).UnixNano())
}

// Up records that Redis answered a probe, and reports whether that
// switched the probe from down to up.
func (p *Probe) Up() bool { return p.down.CompareAndSwap(true, false) }

// Fail records a Redis failure at now and reports whether it switched
// the probe from up to down.
func (p *Probe) Fail(err error, now time.Time) bool {
	p.err.Store(&err)
	if !p.down.CompareAndSwap(false, true) {
		return false
	}
	p.next.Store(now.Add(ProbeInterval).UnixNano())
	return true
}

// LastErr returns the last Redis failure seen.
func (p *Probe) LastErr() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return quota.ErrRedis
}

// A Ledger keeps the units spent while Redis could not be reached, per
// scope and bucket. The zero value is empty and ready; it is safe for
// concurrent use.
type Ledger struct {
	mu   sync.Mutex
	debt map[debtKey]int64
}

type debtKey struct{ scope, bucket string }

// Add notes units spent without Redis.
func (l *Ledger) Add(scope string, charges []costs.Charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.debt == nil {
		l.debt = make(map[debtKey]int64)
	}
	for _, ch := range charges {
		l.debt[debtKey{scope, ch.Bucket}] += ch.Units
	}
}

// A Record writes units spent in scope's bucket to Redis, as many as the
// bucket's limits can count (the units it tries are what stays owed when
// it fails; none: nothing to record them in).
type Record func(ctx context.Context, scope, bucket string, units int64) (tried int64, err error)

// Settle hands the debt to record, a scope bucket at a time, on a context
// of its own. What record fails to write stays owed, and failed hears of it.
func (l *Ledger) Settle(ctx context.Context, record Record, failed func(scope, bucket string, err error)) {
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
		if tried, err := record(cctx, k.scope, k.bucket, units); err != nil {
			l.Add(k.scope, []costs.Charge{{Bucket: k.bucket, Units: tried}})
			failed(k.scope, k.bucket, err)
		}
	}
}
