package tollgate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/forecast"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// Alerts. When Trace.Burning or Trace.Crossed (with Config.Thresholds) is
// set, the Transport checks, off the request's path, the windows this
// process spent in: every alertEvery, a goroutine of its own reads each
// window's usage and log (one read-only script per window: see
// ops.Operator.Series) of the scope buckets admitted since the last
// check, and the windows whose burn-rate alert is on until it ends. An
// idle process reads nothing, and a Transport with neither field set
// starts no goroutine and pays nothing on its requests.

// alertEvery is how often the Transport checks the windows it spent in.
var alertEvery = 5 * time.Second

// An Alert is news of one window of a bucket in a scope, from the checks
// a Transport makes off the requests' path (see docs/foresight.md):
//
//   - a threshold of its limit crossed (Trace.Crossed, Threshold set):
//     reported once per crossing, per window, per process; a threshold is
//     crossed again once the window's count has fallen below it (a sliding
//     window) or the window has reset (a calendar or fixed one);
//   - its burn-rate alert starting or ending (Trace.Burning, Firing says
//     which): at the rates of spending over two spans of the window's
//     length (a twenty-fourth and a two hundred and eighty-eighth: an hour
//     and five minutes of a day, the multiwindow alert of Google's SRE
//     workbook), the window is spent before its units come back.
type Alert struct {
	// Scope and Bucket name the bucket, e.g. "yt-project-1" and "pool".
	Scope, Bucket string
	// Limit is the window's limit as the Transport enforces it, e.g.
	// 9500/day@America/Los_Angeles.
	Limit quota.Limit
	// At is the instant the window was read at, on the limiter's clock.
	At time.Time
	// Used is the units counted in the window at At, e.g. 7700.
	Used int64
	// Threshold is, for Trace.Crossed, the fraction of the limit crossed,
	// one of Config.Thresholds, e.g. 0.8; 0 for Trace.Burning.
	Threshold float64
	// Firing is, for Trace.Burning, true when the alert starts and false
	// when it ends; true for Trace.Crossed.
	Firing bool
	// Rate is the units per second spent over the long span, e.g. 0.41;
	// Span is that span, e.g. an hour. Zero for Trace.Crossed.
	Rate float64
	Span time.Duration
	// Spent is when the window would be spent at Rate; Back when its
	// units come back (the reset of a calendar or fixed window; for a
	// sliding one, the first instant after Spent that units leave). Both
	// zero for Trace.Crossed, and when a burn-rate alert ends and the
	// window is not spent early at Rate.
	Spent, Back time.Time
}

// alerts checks the windows the Transport spent in for the Trace's
// alerts. A nil *alerts checks nothing and costs a request nothing.
type alerts struct {
	op         *ops.Operator
	limits     map[string][]quota.Limit // by bucket, as enforced
	thresholds *forecast.Thresholds     // nil: Crossed is not traced
	burning    func(context.Context, Alert)
	crossed    func(context.Context, Alert)
	log        func(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr)

	mu     sync.RWMutex
	spent  map[scopeBucket]struct{}     // admitted since the last check
	firing map[forecast.Key]scopeBucket // windows whose burn-rate alert is on
	limit  map[forecast.Key]quota.Limit // their limits
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// newAlerts returns the checker of cfg's alert Trace fields, running, or
// nil when none is set.
func newAlerts(cfg *Config, limits map[string][]quota.Limit, th *forecast.Thresholds, h *hooks) *alerts {
	crossed := cfg.Trace.Crossed
	if th == nil {
		crossed = nil
	}
	if cfg.Trace.Burning == nil && crossed == nil {
		return nil
	}
	a := &alerts{op: ops.New(cfg.Limiter), limits: limits, burning: cfg.Trace.Burning, crossed: crossed, log: h.log,
		spent: map[scopeBucket]struct{}{}, firing: map[forecast.Key]scopeBucket{}, limit: map[forecast.Key]quota.Limit{}}
	if crossed != nil {
		a.thresholds = th
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	a.done.Add(1)
	go a.run(ctx)
	return a
}

// admitted notes the buckets a request admitted on Redis charged in the
// scope it spends: the next check reads their windows. It runs on the
// caller of RoundTrip.
func (a *alerts) admitted(r *request) {
	if a == nil || r.endpoint.Free {
		return
	}
	scope := r.spending()
	a.mu.RLock()
	noted := true
	for _, ch := range r.endpoint.Charges {
		if _, ok := a.spent[scopeBucket{scope, ch.Bucket}]; !ok {
			noted = false
			break
		}
	}
	a.mu.RUnlock()
	if noted {
		return // the common case under load: a read lock, no write
	}
	a.mu.Lock()
	for _, ch := range r.endpoint.Charges {
		a.spent[scopeBucket{scope, ch.Bucket}] = struct{}{}
	}
	a.mu.Unlock()
}

// run checks every alertEvery until ctx is done.
func (a *alerts) run(ctx context.Context) {
	defer a.done.Done()
	t := time.NewTicker(alertEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.check(ctx)
	}
}

// close stops the checks and waits for the one under way.
func (a *alerts) close() {
	if a == nil {
		return
	}
	a.stop()
	a.done.Wait()
}

// check reads the windows spent in since the last check, and those whose
// burn-rate alert is on, and calls the Trace's functions on what it finds.
func (a *alerts) check(ctx context.Context) {
	a.mu.Lock()
	spent := a.spent
	a.spent = map[scopeBucket]struct{}{}
	type window struct {
		sb  scopeBucket
		lim quota.Limit
	}
	var windows []window
	seen := map[forecast.Key]bool{}
	for sb := range spent {
		for _, l := range a.limits[sb.bucket] {
			k := forecast.Key{Scope: sb.scope, Bucket: sb.bucket, Window: l.String()}
			seen[k] = true
			windows = append(windows, window{sb, l})
		}
	}
	for k, sb := range a.firing {
		if !seen[k] {
			windows = append(windows, window{sb, a.limit[k]})
		}
	}
	a.mu.Unlock()

	for _, w := range windows {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := a.op.Series(rctx, w.sb.scope, w.sb.bucket, w.lim)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log(ctx, slog.LevelDebug, "tollgate: could not read a window for the alerts",
				slog.String("scope", w.sb.scope), slog.String("bucket", w.sb.bucket), slog.Any("err", err))
			a.mu.Lock()
			a.spent[w.sb] = struct{}{} // read again at the next check
			a.mu.Unlock()
			continue
		}
		k := forecast.Key{Scope: w.sb.scope, Bucket: w.sb.bucket, Window: w.lim.String()}
		if a.thresholds != nil {
			for _, c := range a.thresholds.Observe(k, s.Usage) {
				a.crossed(ctx, Alert{Scope: k.Scope, Bucket: k.Bucket, Limit: w.lim, Threshold: c.Threshold, Firing: true, Used: c.Used, At: c.At})
			}
		}
		if a.burning == nil || w.lim.Refill > 0 {
			continue
		}
		slices := make([]forecast.Slice, len(s.Slices))
		for i, x := range s.Slices {
			slices[i] = forecast.Slice(x)
		}
		b := forecast.BurnRate(s.Usage, slices)
		a.mu.Lock()
		_, was := a.firing[k]
		if b.Firing {
			a.firing[k], a.limit[k] = w.sb, w.lim
		} else {
			delete(a.firing, k)
			delete(a.limit, k)
		}
		a.mu.Unlock()
		if b.Firing == was {
			continue
		}
		al := Alert{Scope: k.Scope, Bucket: k.Bucket, Limit: w.lim, Firing: b.Firing, At: s.Usage.Now, Used: s.Usage.Used,
			Rate: b.Long.Rate, Span: b.Long.Span}
		if b.Long.Early {
			al.Spent, al.Back = b.Long.Spent, b.Long.Back
		}
		a.burning(ctx, al)
	}
}
