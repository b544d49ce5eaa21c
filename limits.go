package tollgate

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/quota"
)

// The limit arithmetic, in one place. A limit tollgate enforces is the
// upstream's quota less the bucket's reserve (Bucket.ReserveUnits and
// ReservePercent), scaled to the FailLocal mode's LocalShare on its
// in-process limiter, scaled again to BackgroundShare for background
// requests, each share at least one unit, and its window (sliding or
// fixed) lengthened by Transit; a token bucket's refill is reserved and
// shared as its capacity is, and Transit takes from its capacity. The limits configured are computed so
// once, in New; a limit an upstream announces (Bucket.Follows) is computed
// the same way as each request needs it (limits.of).

// limits holds what the arithmetic needs, and what announcements taught.
type limits struct {
	buckets    map[string]Bucket // Config.Buckets
	transit    time.Duration     // Config.Transit, or its default; 0: none
	background float64           // Config.BackgroundShare, or its default
	localShare float64           // Config.LocalShare
	name       string            // Config.Name, or its default: the tenant of a request with no caller

	announced map[string]string // bucket: the announced quota it follows; nil when none does
	learned   learn.State       // what announcements taught, per scope bucket
}

// units returns the units tollgate enforces of an upstream quota of
// bucket b: less the reserve, then shared. A quota still to be learned (0
// units) stays 0.
func (a *limits) units(b Bucket, upstream int64, background, local bool) int64 {
	if upstream <= 0 {
		return upstream
	}
	u := max(upstream-b.keep(upstream), 1)
	if local {
		u = share(u, a.localShare)
	}
	if background {
		u = share(u, a.background)
	}
	return u
}

// share scales units to a share of them, at least 1.
func share(units int64, s float64) int64 {
	return max(int64(math.Floor(float64(units)*s)), 1)
}

// window returns the window tollgate counts for an upstream window: a
// sliding or fixed one lengthened by Transit. Requests reach the upstream
// a little after their admission, by up to Transit; counting each for
// that much longer keeps the calls that replace it from reaching the
// upstream's window before it has left. A fixed window so starts Transit
// before the announced reset's window does: the calls admitted just
// before an announcement moved it count in it, as they do upstream.
// Calendar days are left alone: they reset when the upstream does.
func (a *limits) window(w time.Duration, calendar bool) time.Duration {
	if calendar {
		return w
	}
	return w + a.transit
}

// enforce returns the limit tollgate enforces for an upstream limit of
// bucket b. A token bucket's refill is reserved and shared as its
// capacity is, and Transit takes from its capacity (see inTransit) where
// it lengthens a window.
func (a *limits) enforce(b Bucket, l quota.Limit, background, local bool) quota.Limit {
	l.Units = a.units(b, l.Units, background, local)
	if l.Refill > 0 {
		l.Refill = a.units(b, l.Refill, background, local)
		l.Units = a.inTransit(l)
		return l
	}
	l.Window = a.window(l.Window, l.Calendar)
	return l
}

// inTransit returns the capacity tollgate keeps of a token bucket, which
// keeps its period: requests admitted over any span reach the upstream
// over a span up to Transit shorter, in which the upstream's bucket
// refills Refill·Transit/period less, so tollgate's capacity is that much
// below (at least 1 unit). A capacity still to be learned stays 0.
func (a *limits) inTransit(l quota.Limit) int64 {
	if l.Units <= 0 || a.transit <= 0 {
		return l.Units
	}
	less := int64(math.Ceil(float64(l.Refill) * float64(a.transit) / float64(l.Window)))
	return max(l.Units-less, 1)
}

// maxCapacity is the largest capacity the engine holds of a token bucket
// of that period (quota.MaxRefillSpan over the period in µs: 37,529,996
// for a minute). A learned capacity past it is kept at it, its refill
// unchanged: the bucket admits less at once, never more over any span,
// where the engine would refuse the limit and so every request.
func maxCapacity(period time.Duration) int64 {
	return quota.MaxRefillSpan / max(period.Microseconds(), 1)
}

// decider returns a limiter with the limits it enforces, computed from
// the upstream's (checked, by bucket) and the caps on requests in flight.
func (a *limits) decider(lim *quota.Limiter, upstream map[string][]quota.Limit, caps map[string]int, local bool) *decider {
	d := &decider{lim: lim, local: local, transit: a.transit,
		limits:     make(map[string][]quota.Limit, len(upstream)),
		background: make(map[string][]quota.Limit, len(upstream)),
		caps:       make(map[string]int, len(caps)),
	}
	for name, lims := range upstream {
		b := a.buckets[name]
		fg, bg := make([]quota.Limit, len(lims)), make([]quota.Limit, len(lims))
		for i, l := range lims {
			fg[i], bg[i] = a.enforce(b, l, false, local), a.enforce(b, l, true, local)
		}
		d.limits[name], d.background[name] = fg, bg
	}
	for name, n := range caps {
		if local {
			n = max(int(math.Floor(float64(n)*a.localShare)), 1)
		}
		d.caps[name] = n
	}
	return d
}

// of returns the limits d enforces on bucket in scope for a request of
// that priority, with what announcements taught of its first one, and
// whether the bucket is gated: its limit is not known yet (0 units), so
// that one request at a time goes, its first limit left out, until an
// announcement tells it.
func (a *limits) of(d *decider, scope, bucket string, background bool) ([]quota.Limit, bool) {
	lims := d.limits[bucket]
	if background {
		lims = d.background[bucket]
	}
	if _, ok := a.announced[bucket]; !ok || len(lims) == 0 {
		return lims, false
	}
	ln := a.learned.Get(learn.Key{Scope: scope, Bucket: bucket})
	first := lims[0]
	if ln.Limit > 0 {
		first.Units = a.units(a.buckets[bucket], ln.Limit, background, d.local)
		if first.Refill > 0 {
			// A learned token bucket refills its capacity a period.
			first.Refill = first.Units
			first.Units = min(a.inTransit(first), maxCapacity(first.Window))
		}
	}
	if ln.Window > 0 && !first.Calendar && first.Refill == 0 {
		first.Window = a.window(ln.Window, false)
	}
	if first.Fixed {
		first.Ends = ln.Reset
	}
	switch {
	case first.Units == 0:
		return lims[1:], true
	case first == lims[0]:
		return lims, false
	}
	return append([]quota.Limit{first}, lims[1:]...), false
}

// charges turns the request's charges into the limiter's, with each
// bucket's limits on d for its priority in scope (what announcements
// taught included); a limit still to be learned is left out, and so are
// the zero-unit charges of a free request, which only name buckets for
// their caps.
func (a *limits) charges(d *decider, r *request, scope string) []quota.Demand {
	if r.endpoint.Free {
		return nil
	}
	out := make([]quota.Demand, 0, len(r.endpoint.Charges))
	for _, ch := range r.endpoint.Charges {
		lims := d.limits[ch.Bucket]
		if r.background {
			lims = d.background[ch.Bucket]
		}
		if a.announced != nil {
			lims, _ = a.of(d, scope, ch.Bucket, r.background)
			if len(lims) == 0 {
				continue // nothing known to check: its gate holds it to one at a time
			}
		}
		c := quota.Demand{Bucket: ch.Bucket, Units: ch.Units, Limits: lims}
		if b := a.buckets[ch.Bucket]; b.Pace != nil || b.Shares != nil {
			c.Pace, c.Shares = b.Pace, b.Shares
			if b.Shares != nil {
				c.Tenant = a.tenant(r)
			}
		}
		out = append(out, c)
	}
	return out
}

// tenant returns the tenant of a request, for a bucket's Shares: its
// caller (WithCaller), else the Transport's name (Config.Name, or its
// default).
func (a *limits) tenant(r *request) string {
	if c := callerOf(r.req.Context()); c != "" {
		return c
	}
	return a.name
}

// fair reports whether bucket has a pace or shares.
func (a *limits) fair(bucket string) bool {
	b := a.buckets[bucket]
	return b.Pace != nil || b.Shares != nil
}

// usable drops a limit still to be learned (0 units), which no script can
// check.
func usable(limits []quota.Limit) []quota.Limit {
	if len(limits) > 0 && limits[0].Units == 0 {
		return limits[1:]
	}
	return limits
}
