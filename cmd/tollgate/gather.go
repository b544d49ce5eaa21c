package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

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

// isRedisDown reports an error of Redis itself (unreachable, failing),
// which the whole report fails on, as opposed to one key's value.
func isRedisDown(err error) bool {
	var re *quota.RedisError
	return errors.As(err, &re)
}
