package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// A report is what status shows: every scope, bucket and window found
// under the prefix, read at one instant. It is also the -json output.
type report struct {
	At     time.Time     `json:"at"`
	Prefix string        `json:"prefix"`
	Scopes []scopeReport `json:"scopes"`
	// Actions are the newest operators' actions, newest first (see
	// actions.go); left out when there are none.
	Actions []actionReport `json:"actions,omitempty"`
}

type scopeReport struct {
	Scope string `json:"scope"`
	// Hashed: the keys hold a hash of the name, and no process described
	// a bucket of it, so the name is not known.
	Hashed            bool           `json:"hashed,omitempty"`
	Pause             *pauseReport   `json:"pause,omitempty"`
	BackgroundWaiting int            `json:"background_waiting"`
	Buckets           []bucketReport `json:"buckets"`
	// Spending: the refusals by pauses of the whole scope, as processes
	// report them (spenders.go); absent when none does.
	Spending *spendingReport `json:"spending,omitempty"`
	// Err: why the scope could not be read (a key holding a value no
	// tollgate wrote, or of a newer format); it is then shown by name and
	// this error alone, and the other scopes as usual.
	Err string `json:"error,omitempty"`
}

type pauseReport struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

type bucketReport struct {
	Bucket string `json:"bucket"`
	// Described: a process left the bucket's limits in Redis; without
	// them the windows found are listed by name only.
	Described bool           `json:"described"`
	Announced string         `json:"announced,omitempty"`
	Pause     *pauseReport   `json:"pause,omitempty"`
	Windows   []windowReport `json:"windows"`
	// Undescribed are windows found with no limit described for them,
	// as keys name them.
	Undescribed []string   `json:"undescribed_windows,omitempty"`
	Leases      int        `json:"leases"`
	Leased      int64      `json:"leased_units"`
	LeasedUntil *time.Time `json:"leased_until,omitempty"`
	InFlight    int        `json:"in_flight"`
	InFlightCap int        `json:"in_flight_cap,omitempty"`
	SlotWaiting int        `json:"slot_waiting"`
	// Spending is who spends the bucket, what waits and what is refused,
	// as processes report it (spenders.go); absent when none does.
	Spending *spendingReport `json:"spending,omitempty"`
}

// tenantReport is one tenant of a window with shares (ops.Tenant).
type tenantReport struct {
	Name  string  `json:"name"`
	Units int64   `json:"units"`
	Share float64 `json:"share"` // its share of the window by now, as the bucket's description says

	Held int64     `json:"held_later,omitempty"`
	Seen time.Time `json:"seen"`
	// Waiting is how many of its requests wait in the bucket's room
	// (ops.Tenant.Waiting), e.g. 2.
	Waiting int `json:"waiting,omitempty"`
}

type windowReport struct {
	// Window names the window as configured (without the Transit the
	// Transport lengthened it by), e.g. "day America/Los_Angeles",
	// "sliding 1m40s", "fixed 1h0m0s".
	Window string `json:"window"`
	// Limit is the units tollgate lets through, Quota the upstream's
	// units behind it (0: not told).
	Limit int64 `json:"limit"`
	Quota int64 `json:"quota,omitempty"`
	// Used is what the window counts as admitted and spent at At, e.g.
	// 561: what the upstream may have had; above Limit only when more
	// was spent than admitted (tollgate spend, an upstream's extra
	// charge). Held is apart: the units held for requests waiting for
	// room, dated later, e.g. 709. (Before, Used counted Held too.)
	Used int64 `json:"used"`
	Held int64 `json:"held"`
	// Remaining is the room left for new requests: Limit less Used and
	// Held, never below zero.
	Remaining int64 `json:"remaining"`
	// NextFree is when the oldest counted units leave; Reset when all
	// have (a calendar day's next midnight). A token bucket's Used is
	// what is out of it (Limit, its capacity, less its level, Remaining),
	// NextFree when it holds a unit more, Reset when it is full again.
	NextFree *time.Time `json:"next_free,omitempty"`
	Reset    *time.Time `json:"reset,omitempty"`
	// Refill is a token bucket's refill per Period, e.g. 4000 per "1m0s";
	// 0 for a window.
	Refill int64  `json:"refill,omitempty"`
	Period string `json:"period,omitempty"`
	// Forecast is what becomes of the window at the rate it is spent now.
	Forecast *forecastReport `json:"forecast,omitempty"`
	// Tenants are what each tenant of a window with shares spent in it
	// (Bucket.Shares), by name; absent without shares.
	Tenants []tenantReport `json:"tenants,omitempty"`
	// PaceLine is what a paced window (Bucket.Pace) may have spent by
	// now; absent without a pace.
	PaceLine  *int64 `json:"pace_line,omitempty"`
	paceBurst int64  // what the pace lets be spent from the window's start
	zone      *time.Location
	limit     quota.Limit // as enforced: the page's chart spans its window
	slices    []ops.Slice // what the window counts, for the page's chart
}

// gather reads the report: one scope, or every scope when scope is "".
// Forecasts say instants in zone, but a calendar day's in its own.
func gather(ctx context.Context, lim *quota.Limiter, client redis.UniversalClient, prefix, scope string, clock func() time.Time, zone *time.Location) (*report, error) {
	stored, err := ops.New(lim).Survey(ctx, scope)
	if err != nil {
		return nil, err
	}
	now, err := serverNow(ctx, client, clock)
	if err != nil {
		return nil, err
	}
	r := &report{At: now, Prefix: prefix, Scopes: []scopeReport{}}
	// What the processes report they spend: who spends, per bucket, and
	// the rates that token buckets' forecasts need.
	spending, err := readSpending(ctx, client, prefix, scope, now)
	if err != nil {
		return nil, err
	}
	for _, s := range stored {
		sr, err := gatherScope(ctx, lim, s, now, zone, bucketRates(spending, s.Scope))
		if err != nil {
			if ctx.Err() != nil || isRedisDown(err) {
				return nil, fmt.Errorf("scope %s: %w", s.Scope, err)
			}
			// One scope's unreadable key hides that scope alone.
			sr = scopeReport{Scope: s.Scope, Hashed: s.Hashed, Buckets: []bucketReport{}, Err: oneLine(err.Error())}
		}
		r.Scopes = append(r.Scopes, sr)
	}
	addSpending(r, spending)
	if r.Actions, err = gatherActions(ctx, lim, scope); err != nil {
		return nil, err
	}
	return r, nil
}

// gatherScope reads one scope's report; rates are what the processes
// report they spend per bucket (nil: unknown).
func gatherScope(ctx context.Context, lim *quota.Limiter, s ops.StoredScope, now time.Time, zone *time.Location, rates map[string]float64) (scopeReport, error) {
	sr := scopeReport{Scope: s.Scope, Hashed: s.Hashed, Buckets: []bucketReport{}}
	if s.Hashed {
		// Its keys cannot be named from a hash: list what was found.
		for _, b := range s.Buckets {
			sr.Buckets = append(sr.Buckets, bucketReport{Bucket: b.Bucket, Windows: []windowReport{}, Undescribed: b.Windows})
		}
		return sr, nil
	}
	if s.Paused {
		p, err := lim.PauseOf(ctx, s.Scope, "")
		if err != nil {
			return sr, err
		}
		sr.Pause = pauseIn(p, now)
	}
	for _, b := range s.Buckets {
		if b.Err != nil {
			return sr, fmt.Errorf("bucket %s: %w", b.Bucket, b.Err)
		}
		br := bucketReport{Bucket: b.Bucket, Windows: []windowReport{}}
		if b.Paused {
			p, err := lim.PauseOf(ctx, s.Scope, b.Bucket)
			if err != nil {
				return sr, err
			}
			br.Pause = pauseIn(p, now)
		}
		var limits []quota.Limit
		var quotas []int64
		var transit time.Duration
		if d := b.Description; d != nil {
			br.Described, br.Announced, br.InFlightCap, transit = true, d.Announced, d.InFlight, d.Transit
			var a quota.Announced
			var known bool
			if d.Announced != "" {
				var err error
				if a, known, err = lim.LastAnnouncement(ctx, s.Scope, b.Bucket); err != nil {
					return sr, err
				}
			}
			limits = d.Enforced(a, known)
			quotas = d.Quotas
			if d.Announced != "" && len(limits) < len(d.Limits) {
				quotas = quotas[min(1, len(quotas)):] // the first limit is still to be learned
			} else if d.Announced != "" && known && len(quotas) > 0 {
				quotas = append([]int64{a.Limit}, quotas[1:]...)
			}
		}
		for i, l := range limits {
			series, err := ops.New(lim).Series(ctx, s.Scope, b.Bucket, l)
			if err != nil {
				return sr, err
			}
			u := series.Usage
			w := windowReport{Window: windowName(l, transit), Limit: l.Units, Used: u.Used - u.Held, Held: u.Held, Remaining: u.Remaining,
				NextFree: optional(u.NextFree), Reset: optional(u.Reset), limit: l, slices: series.Slices}
			if i < len(quotas) {
				w.Quota = quotas[i]
			}
			ts, err := ops.New(lim).Tenants(ctx, s.Scope, b.Bucket, l, now)
			if err != nil {
				return sr, err
			}
			var d quota.Description
			if b.Description != nil {
				d = *b.Description
			}
			line, paced := paceLine(l, d.Pace, now)
			if paced {
				w.PaceLine = &line
				w.paceBurst = int64(math.Floor(d.Pace.Burst * float64(l.Units)))
			}
			for _, t := range ts {
				w.Tenants = append(w.Tenants, tenantReport{Name: t.Name, Units: t.Units, Held: t.Held, Seen: t.Seen, Waiting: t.Waiting})
			}
			shareOf(w.Tenants, d.Shares, line, now)
			if l.Calendar {
				w.zone = l.Location
			}
			loc := zone
			if w.zone != nil {
				loc = w.zone
			}
			if l.Refill > 0 {
				w.Refill, w.Period = l.Refill, l.Window.String()
				w.Forecast = forecastBucket(series, rates[b.Bucket], rates != nil, loc)
			} else {
				w.Forecast = forecastWindow(series, loc)
			}
			if f := w.Forecast; f != nil && f.AtRisk && w.PaceLine != nil {
				// The pace line reaches the limit at the reset, not before:
				// the window is never spent early, its requests wait.
				f.AtRisk, f.SpentAt, f.Before = false, nil, ""
				f.Text = "at this rate, the pace holds it back: it spends along the pace line until the reset"
			}
			br.Windows = append(br.Windows, w)
		}
		if !br.Described {
			br.Undescribed = b.Windows
		}
		probe := quota.PerWindow(1, time.Second) // leases are read from the first window's
		for _, l := range limits {
			if l.Refill == 0 { // a token bucket holds no lease
				probe = l
				break
			}
		}
		a, err := ops.New(lim).Activity(ctx, s.Scope, b.Bucket, probe)
		if err != nil {
			return sr, err
		}
		br.Leases, br.Leased, br.LeasedUntil = a.Leases, a.Leased, optional(a.LeasedUntil)
		br.InFlight, br.SlotWaiting = a.InFlight, a.SlotWaiters
		sr.BackgroundWaiting = a.BackgroundWaiters
		sr.Buckets = append(sr.Buckets, br)
	}
	return sr, nil
}

// pauseIn reports a pause still in force at now.
func pauseIn(p quota.Paused, now time.Time) *pauseReport {
	if !p.Until.After(now) {
		return nil
	}
	return &pauseReport{Until: p.Until.UTC(), Reason: p.Reason}
}

// serverNow is the instant the decisions are made at: Redis's clock, or
// the fixed one.
func serverNow(ctx context.Context, client redis.UniversalClient, clock func() time.Time) (time.Time, error) {
	if clock != nil {
		return clock(), nil
	}
	t, err := client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("reading Redis's clock: %w", err)
	}
	return t, nil
}

// windowName names a limit's window for people, as it was configured:
// the Transport lengthened sliding and fixed windows by transit (the
// description's Transit), which is tollgate's margin, not the upstream's
// window.
func windowName(l quota.Limit, transit time.Duration) string {
	w := l.Window
	if w > transit {
		w -= transit
	}
	switch {
	case l.Calendar:
		return "day " + l.Location.String()
	case l.Fixed:
		return "fixed " + w.String()
	case l.Refill > 0:
		return fmt.Sprintf("refilling %d/%v", l.Refill, l.Window)
	}
	return "sliding " + w.String()
}

// optional is an instant for -json: nil when zero, else in UTC, so that
// the report reads the same whatever the machine's zone.
func optional(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// isRedisDown reports an error of Redis itself (unreachable, failing),
// which the whole report fails on, as opposed to one key's value.
func isRedisDown(err error) bool {
	var re *quota.RedisError
	return errors.As(err, &re)
}

// paceLine returns what a paced calendar day or fixed window may have
// spent by now (quota.Pace): B + floor((L-B)·elapsed/length); else the
// limit and false.
func paceLine(l quota.Limit, p *quota.Pace, now time.Time) (int64, bool) {
	var start, end time.Time
	switch {
	case l.Calendar:
		y, m, d := now.In(l.Location).Date()
		start, end = time.Date(y, m, d, 0, 0, 0, 0, l.Location), time.Date(y, m, d+1, 0, 0, 0, 0, l.Location)
	case l.Fixed && !l.Ends.IsZero() && l.Window > 0:
		k := now.Sub(l.Ends) / l.Window
		start = l.Ends.Add(k * l.Window)
		if start.After(now) {
			start = start.Add(-l.Window)
		}
		end = start.Add(l.Window)
	default:
		return l.Units, false
	}
	if p == nil {
		return l.Units, false
	}
	b := int64(math.Floor(p.Burst * float64(l.Units)))
	q := new(big.Int).Mul(big.NewInt(l.Units-b), big.NewInt(now.Sub(start).Microseconds()))
	q.Quo(q, big.NewInt(end.Sub(start).Microseconds()))
	return b + q.Int64(), true
}

// shareOf fills in each tenant's share of a window that allows allowed
// units by now: allowed·weight/W, W the weights of the tenants listed and
// of those not listed seen within Idle (quota.Shares).
func shareOf(ts []tenantReport, s *quota.Shares, allowed int64, now time.Time) {
	if s == nil {
		return
	}
	idle := s.Idle
	if idle == 0 {
		idle = 5 * time.Minute
	}
	var sum float64
	for _, w := range s.Weights {
		sum += w
	}
	for _, t := range ts {
		if _, listed := s.Weights[t.Name]; !listed && t.Seen.After(now.Add(-idle)) {
			sum++
		}
	}
	for i, t := range ts {
		w, listed := s.Weights[t.Name]
		if !listed {
			w = 1
		}
		if sum > 0 {
			ts[i].Share = float64(allowed) * w / sum
		}
	}
}
