package tollgate

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// Redis health. While Redis answers, every decision goes to it. When a
// decision fails for want of Redis, the Transport switches to the outage
// modes, and from then on one request every probeInterval first checks
// whether Redis answers again (a PING of the node holding its scope,
// bounded by probeTimeout); the others
// go straight to their outage mode, so an outage costs them no time. There
// is no background goroutine: nothing runs between requests.
const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 500 * time.Millisecond
)

// health tracks whether Redis answers, the units spent while it did not,
// and the in-process limiter of the Local outage mode.
type health struct {
	down      atomic.Bool
	nextProbe atomic.Int64 // unix ns after which a request may probe
	err       atomic.Pointer[error]

	mu       sync.Mutex
	debt     map[debtKey]int64 // units spent off Redis, to record when it returns
	local    *quota.Limiter
	newLocal func() (*quota.Limiter, error)
	closed   bool
}

type debtKey struct{ scope, bucket string }

// useRedis reports whether this request should ask Redis: always while it
// is up; while it is down, only the request that wins the next probe, and
// only when the probe (a PING of the node holding the request's scope)
// succeeds, which switches back to Redis.
func (h *health) useRedis(ctx context.Context, t *Transport, st *state, scope string) bool {
	if !h.down.Load() {
		return true
	}
	next := h.nextProbe.Load()
	now := time.Now().UnixNano()
	if now < next || !h.nextProbe.CompareAndSwap(next, now+int64(probeInterval)) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := t.Limiter.Ping(pctx, scope); err != nil {
		return false
	}
	h.markUp(ctx, t, st)
	return true
}

// markDown switches to the outage modes after a Redis failure.
func (h *health) markDown(ctx context.Context, t *Transport, err error) {
	h.err.Store(&err)
	if !h.down.CompareAndSwap(false, true) {
		return
	}
	h.nextProbe.Store(time.Now().Add(probeInterval).UnixNano())
	t.log(ctx, slog.LevelWarn, "tollgate: redis unavailable; endpoints fall back on their outage mode", slog.Any("err", err))
	if t.OnSwitch != nil {
		t.OnSwitch(Switch{Up: false, Err: err})
	}
}

// markUp switches back to Redis and records there what was spent while it
// was away.
func (h *health) markUp(ctx context.Context, t *Transport, st *state) {
	if !h.down.CompareAndSwap(true, false) {
		return
	}
	t.log(ctx, slog.LevelWarn, "tollgate: redis answers again; decisions return to it")
	if t.OnSwitch != nil {
		t.OnSwitch(Switch{Up: true})
	}
	h.settle(ctx, t, st)
}

// lastErr returns the last Redis failure seen.
func (h *health) lastErr() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return quota.ErrRedis
}

// addDebt notes units spent without Redis.
func (h *health) addDebt(scope string, charges []costs.Charge) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.debt == nil {
		h.debt = make(map[debtKey]int64)
	}
	for _, ch := range charges {
		h.debt[debtKey{scope, ch.Bucket}] += ch.Units
	}
}

// settle records in Redis the units spent while it was away, so that the
// shared count includes them. A bucket's debt is capped at its smallest
// limit: beyond that the window is full either way. What cannot be recorded
// now stays owed.
func (h *health) settle(ctx context.Context, t *Transport, st *state) {
	h.mu.Lock()
	debt := h.debt
	h.debt = nil
	h.mu.Unlock()
	if len(debt) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for k, units := range debt {
		limits := st.limits[k.bucket]
		for _, l := range limits {
			units = min(units, l.Units)
		}
		_, err := t.Limiter.Record(cctx, k.scope, quota.Charge{Bucket: k.bucket, Cost: units, Limits: limits})
		if err != nil {
			h.addDebt(k.scope, []costs.Charge{{Bucket: k.bucket, Units: units}})
			t.log(ctx, slog.LevelWarn, "tollgate: could not record units spent during the outage",
				slog.String("scope", k.scope), slog.String("bucket", k.bucket), slog.Any("err", err))
		}
	}
}

// localLimiter returns the in-process limiter, starting it on first use.
func (h *health) localLimiter() (*quota.Limiter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.local == nil {
		l, err := h.newLocal()
		if err != nil {
			return nil, err
		}
		h.local = l
	}
	return h.local, nil
}

// close stops the in-process limiter.
func (h *health) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.local == nil {
		return nil
	}
	err := h.local.Close()
	h.local = nil
	return err
}
