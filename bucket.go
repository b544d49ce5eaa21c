package tollgate

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A Bucket holds the limits of one quota bucket of the upstream and the
// reserve kept below them, so that tollgate runs out before the upstream
// does: a 403 from the upstream is a worse signal than a clean refusal, and
// the reserve absorbs calls made outside tollgate (a developer's curl, a
// backfill script).
type Bucket struct {
	// Limits are the upstream's quotas for the bucket, e.g. 10,000 units a
	// Pacific day; smoothing limits of your own may sit beside them, e.g.
	// 420 units an hour.
	Limits []quota.Limit
	// ReserveUnits is kept below every limit, e.g. 500.
	ReserveUnits int64
	// ReservePercent is kept below every limit as a share of it, rounded
	// up, e.g. 5 keeps 500 of 10,000.
	ReservePercent float64
	// MaxInFlight, when positive, caps the bucket's requests in flight at once
	// in each scope, for every process sharing the Redis, e.g. 100 for
	// GitHub's concurrent requests per user. A request holds its slot from
	// its admission until its response body is read to its end or closed,
	// or it fails; a dead process's slots are free again within
	// quota.SlotTTL. Its requests are decided call by call, never from a
	// lease.
	MaxInFlight int
	// Follows ties the bucket to a quota its upstream announces in its
	// responses' headers (package announce): by name, e.g. "core"
	// (GitHub's X-RateLimit-Resource), "tokens" (OpenAI), a policy of the
	// IETF draft's RateLimit fields; or as "dialect/name", e.g.
	// "github/core" (providers/shopify's buckets follow "shopify/points"
	// and "shopify/requests", which it reads from Shopify's answers). Units the upstream counts beyond tollgate's count are
	// then counted as spent until its announced reset, by every process;
	// an announced limit (and window, when stated) replaces the first
	// limit's, reserve kept; an announcement that nothing is left pauses
	// the bucket until the reset. The first limit may then have 0 units:
	// not known until announced, one request at a time goes through per
	// scope until the first announcement. An announced bucket is decided
	// call by call, never from a lease.
	Follows string
	// Pace, when set, spreads the bucket's calendar days and fixed
	// windows over their length: at any instant, what a window has spent
	// since it began is at most Burst·L + (1−Burst)·L·elapsed/length, L
	// being the limit less the reserve; unused pace carries forward.
	// Sliding windows and token buckets are unaffected. A refused
	// request's RetryAfter is when the pace line reaches its cost. nil:
	// off. See docs/shares.md.
	Pace *Pace
	// Shares, when set, divides the bucket's calendar days and fixed
	// windows among tenants: a request's tenant is its caller
	// (WithCaller), else Config.Name. A tenant below its share is
	// admitted whenever its request fits in its unspent share; beyond it,
	// it spends only what the others neither hold nor keep back while
	// idle. Sliding windows and token buckets are unaffected. Requests of
	// such a bucket are decided call by call, never from a lease, and a
	// refusal is not remembered for other tenants. nil: off. See
	// docs/shares.md.
	Shares *Shares
}

// Pace spreads a bucket's calendar days and fixed windows over their
// length (Bucket.Pace): Burst, 0..1, is the share of the window's limit
// that may be spent from its start. It is quota.Pace.
type Pace = quota.Pace

// Shares divides a bucket's calendar days and fixed windows among
// tenants (Bucket.Shares): Weights maps a tenant to its weight (tenants
// not listed weigh 1), Lendable (0..1) is the part of an idle tenant's
// unspent share others may spend, and a tenant with no request for Idle
// (0: 5 minutes) is idle. It is quota.Shares.
type Shares = quota.Shares

// check validates the bucket's limits and reserve, and returns its limits
// as the upstream states them (the first named learnedName when the
// bucket follows an announced quota). It fails when a reserve leaves no
// room at all.
func (b Bucket) check(name string) ([]quota.Limit, error) {
	if len(b.Limits) == 0 {
		return nil, configErrorf("bucket %q has no limits", name)
	}
	if b.ReserveUnits < 0 || b.ReservePercent < 0 || b.ReservePercent >= 100 || math.IsNaN(b.ReservePercent) {
		return nil, configErrorf("bucket %q: reserve must be at least zero and under 100%%", name)
	}
	if b.Pace != nil && !(b.Pace.Burst >= 0 && b.Pace.Burst <= 1) {
		return nil, configErrorf("bucket %q: Pace.Burst %v is not within [0, 1]", name, b.Pace.Burst)
	}
	if s := b.Shares; s != nil {
		if !(s.Lendable >= 0 && s.Lendable <= 1) {
			return nil, configErrorf("bucket %q: Shares.Lendable %v is not within [0, 1]", name, s.Lendable)
		}
		if s.Idle < 0 {
			return nil, configErrorf("bucket %q: Shares.Idle %v is negative", name, s.Idle)
		}
		for tenant, w := range s.Weights {
			if !(w > 0) || math.IsInf(w, 0) {
				return nil, configErrorf("bucket %q: Shares.Weights[%q] %v is not a positive weight", name, tenant, w)
			}
		}
	}
	if b.MaxInFlight < 0 {
		return nil, configErrorf("bucket %q: MaxInFlight %d: a cap must allow at least one request, or be 0 for none", name, b.MaxInFlight)
	}
	out := make([]quota.Limit, len(b.Limits))
	for i, l := range b.Limits {
		if i == 0 && b.Follows != "" {
			// Its window keeps its keys whatever is announced; its units
			// may be left to the announcements.
			l.Name = learnedName
			if l.Units == 0 {
				probe := l
				probe.Units = 1
				if err := probe.Validate(); err != nil {
					return nil, configErrorf("bucket %q: %v", name, err)
				}
				out[i] = l
				continue
			}
		}
		if err := l.Validate(); err != nil {
			return nil, configErrorf("bucket %q: %v", name, err)
		}
		for _, o := range b.Limits[:i] {
			if sameWindow(l, o) {
				return nil, configErrorf("bucket %q: limits %v and %v count the same window", name, o, l)
			}
		}
		if keep := b.keep(l.Units); keep >= l.Units {
			return nil, configErrorf("bucket %q: a reserve of %d leaves nothing of limit %v", name, keep, l)
		}
		if keep := b.keep(l.Refill); l.Refill > 0 && keep >= l.Refill {
			return nil, configErrorf("bucket %q: a reserve of %d leaves nothing of the refill of limit %v", name, keep, l)
		}
		out[i] = l
	}
	return out, nil
}

// keep is the reserve kept below a limit of units.
func (b Bucket) keep(units int64) int64 {
	return b.ReserveUnits + int64(math.Ceil(float64(units)*b.ReservePercent/100))
}

// sameWindow reports whether two valid limits count the same window, which
// one bucket may name once.
func sameWindow(a, b quota.Limit) bool {
	if a.Name != "" || b.Name != "" {
		return a.Name == b.Name
	}
	if a.Calendar || b.Calendar {
		return a.Calendar && b.Calendar && a.Location.String() == b.Location.String()
	}
	if (a.Refill > 0) != (b.Refill > 0) {
		return false // a token bucket and a window have keys of their own
	}
	return a.Window.Truncate(time.Microsecond) == b.Window.Truncate(time.Microsecond)
}

// defaultBackgroundShare is the share of each limit background requests
// may spend when Config.BackgroundShare does not say.
const defaultBackgroundShare = 0.8

// defaultTransit is the Transit of a Config that sets none: enough for a
// loaded machine to wake a waiting request and send it.
const defaultTransit = 50 * time.Millisecond

// transit is the Transit a Config asks for.
func transit(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return defaultTransit
	case d < 0:
		return 0
	}
	return d
}

// configured checks the limits of each bucket a cost table charges, and
// returns them as the upstream states them (see Bucket.check), with the
// caps on requests in flight. A bucket the table charges must be
// configured.
func configured(charged []string, buckets map[string]Bucket) (map[string][]quota.Limit, map[string]int, error) {
	limits := make(map[string][]quota.Limit, len(charged))
	caps := make(map[string]int)
	for _, name := range charged {
		b, ok := buckets[name]
		if !ok {
			return nil, nil, configErrorf("the cost table charges bucket %q, which Config.Buckets does not define", name)
		}
		lims, err := b.check(name)
		if err != nil {
			return nil, nil, err
		}
		limits[name] = lims
		if b.MaxInFlight > 0 {
			caps[name] = b.MaxInFlight
		}
	}
	return limits, caps, nil
}
