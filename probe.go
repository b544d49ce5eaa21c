package tollgate

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Redis health. While Redis answers, every decision goes to it. When a
// decision fails for want of Redis, the Transport switches to the outage
// modes, and from then on one request every probeInterval first checks
// whether Redis answers again (a PING of the node holding its scope,
// bounded by probeTimeout); the others go straight to their outage mode,
// so an outage costs them no time: they do not wait for the probe. There
// is no background goroutine: nothing runs between requests.
const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 500 * time.Millisecond
)

// probe tracks whether Redis answers.
type probe struct {
	down atomic.Bool
	next atomic.Int64 // unix ns after which a request may probe
	err  atomic.Pointer[error]
}

// due reports whether a request at now should probe Redis: only while it
// is down, and only the one request that wins the slot.
func (p *probe) due(now time.Time) bool {
	next := p.next.Load()
	return now.UnixNano() >= next && p.next.CompareAndSwap(next, now.Add(probeInterval).UnixNano())
}

// fail records a Redis failure at now and reports whether it switched
// the probe from up to down.
func (p *probe) fail(err error, now time.Time) bool {
	p.err.Store(&err)
	if !p.down.CompareAndSwap(false, true) {
		return false
	}
	p.next.Store(now.Add(probeInterval).UnixNano())
	return true
}

// lastErr returns the last Redis failure seen.
func (p *probe) lastErr() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return quota.ErrRedis
}

// askRedis reports whether this request should ask Redis: always while it
// is up; while it is down, only the request that wins the next probe, and
// only when its PING of the node holding the scope succeeds, which
// switches back to Redis and records there what was spent meanwhile.
func (t *Transport) askRedis(ctx context.Context, scope string) bool {
	if !t.probe.down.Load() {
		return true
	}
	if !t.probe.due(t.now()) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := t.cfg.Limiter.Ping(pctx, scope); err != nil {
		return false
	}
	if t.probe.down.CompareAndSwap(true, false) {
		t.switched(ctx, Switch{Up: true})
		t.ledger.settle(ctx, &t.redis, t.log)
	}
	return true
}

// redisFailed switches to the outage modes after a Redis failure.
func (t *Transport) redisFailed(ctx context.Context, err error) {
	if t.probe.fail(err, t.now()) {
		t.deafen()
		t.switched(ctx, Switch{Up: false, Err: err})
	}
}

// switched tells the hook and the log of a switch.
func (t *Transport) switched(ctx context.Context, s Switch) {
	if s.Up {
		t.log(ctx, slog.LevelWarn, "tollgate: redis answers again; decisions return to it")
	} else {
		t.log(ctx, slog.LevelWarn, "tollgate: redis unavailable; endpoints fall back on their outage mode", slog.Any("err", s.Err))
	}
	if t.cfg.OnSwitch != nil {
		t.cfg.OnSwitch(s)
	}
}
