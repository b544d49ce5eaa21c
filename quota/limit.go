package quota

import (
	"fmt"
	"time"
)

// MaxUnits is the largest number of units a limit may hold. The script keeps
// sums and timestamps in Lua numbers (doubles), which are exact integers up to
// 2^53; capping a limit at 2^50 leaves room for sums of held units on top.
const MaxUnits = 1 << 50

// A Limit caps the units admitted in a window: Units per sliding Window,
// per calendar day in Location, or per fixed Window that ends at Ends.
//
// A sliding window counts, at every instant T, the units admitted in
// (T-Window, T]. A calendar day counts the units admitted since the last local
// midnight in Location and resets at the next one, so a day may last 23 or 25
// hours when daylight saving time begins or ends. A fixed window counts the
// units admitted in [Ends-Window, Ends) and starts afresh at Ends: it follows
// an upstream that announces its window by the instant it resets (GitHub's
// hour, which starts with the first request after the last reset), given
// the latest instant announced.
//
// A token bucket ([TokenBucket]) holds Units, spent by calls and refilled
// continuously at Refill units per Window.
//
// Use [PerWindow], [PerDay], [PerFixedWindow] and [TokenBucket] to build
// one; the zero Limit is invalid.
type Limit struct {
	// Units is the most the window admits, e.g. 9500.
	Units int64
	// Window is the length of a sliding window, e.g. time.Hour, or the
	// period a token bucket's Refill is given per. It is truncated to whole
	// microseconds, the engine's resolution. It must be zero for a calendar
	// limit.
	Window time.Duration
	// Calendar makes the limit a calendar day in Location instead of a
	// sliding window.
	Calendar bool
	// Location is the time zone whose midnight resets a calendar limit, e.g.
	// America/Los_Angeles for YouTube. Processes sharing a limit must agree
	// on it, so prefer a named zone to time.Local.
	Location *time.Location
	// Fixed makes the limit a fixed window of length Window that ends at
	// Ends; the windows after it follow each other, Window long, until a
	// new end is given. Until an end is known (Ends zero), it is decided as
	// a sliding window of the same length, which never counts less than any
	// fixed window would.
	Fixed bool
	// Ends is when a fixed window ends, e.g. the reset instant GitHub
	// announces in X-RateLimit-Reset.
	Ends time.Time
	// Name, when set, names the window in Redis keys instead of its length
	// (or zone), so that a limit whose window changes keeps counting what
	// was spent: e.g. "announced" for a window learned from an upstream's
	// announcements. One bucket may not name a window twice.
	Name string
	// Refill, when positive, makes the limit a token bucket (see
	// [TokenBucket]): Units is its capacity, refilled continuously at
	// Refill units per Window, e.g. 4000 per time.Minute.
	Refill int64
	// AsUpstream makes a token bucket's refunds (Reservation.Settle to
	// fewer units) give back what an upstream gives back that charges a
	// call's estimate when it arrives and corrects it to the true cost
	// when the call ends, refilling all the while: Anthropic's output
	// tokens, charged max_tokens and "adjusted at the end of the
	// request" (https://docs.anthropic.com/en/api/rate-limits). The
	// refund is then all of the difference, at the settlement's instant,
	// up to a full bucket, as the upstream's own bucket takes it back;
	// without AsUpstream it is the difference less what the bucket
	// refilled while later calls counted on it, which never lets any
	// past span exceed Units + Refill·span/Window whoever the upstream
	// is. See docs/token-buckets.md. It changes no key: processes that
	// differ in it may share a bucket. A lease (Limiter.Lease) is not
	// taken on such a bucket.
	AsUpstream bool
}

// MaxRefillSpan bounds a token bucket's capacity times its period: the
// engine counts a bucket's level in units times µs of the period, exact
// integers in Lua's doubles up to 2^53, and keeps room above the capacity
// for extra charges settled after the response.
const MaxRefillSpan = 1 << 51

// PerWindow returns a sliding limit of units per window.
func PerWindow(units int64, window time.Duration) Limit {
	return Limit{Units: units, Window: window}
}

// PerDay returns a calendar limit of units per day that resets at midnight in loc.
func PerDay(units int64, loc *time.Location) Limit {
	return Limit{Units: units, Calendar: true, Location: loc}
}

// PerFixedWindow returns a limit of units per fixed window of length window
// that ends at ends (zero: not known yet).
func PerFixedWindow(units int64, window time.Duration, ends time.Time) Limit {
	return Limit{Units: units, Window: window, Fixed: true, Ends: ends}
}

// TokenBucket returns a limit that refills: a bucket of capacity units,
// full at first, refilled continuously at refill units per period, e.g.
// TokenBucket(4000, 4000, time.Minute) for Anthropic's 4,000 requests per
// minute. For every instant T and every earlier T0, the units admitted in
// [T0, T] never exceed capacity + refill·(T−T0)/period, the guarantee of
// the generic cell rate algorithm, which is how the engine decides it: a
// burst may spend the capacity at once, and the bucket is full again
// capacity/refill periods after it was emptied, where a sliding window of
// the same size waits a whole window.
func TokenBucket(capacity, refill int64, period time.Duration) Limit {
	return Limit{Units: capacity, Window: period, Refill: refill}
}

// refilling reports whether the limit is a token bucket.
func (l Limit) refilling() bool { return l.Refill > 0 }

// String describes the limit, e.g. "100/1m0s", "9500/day@America/Los_Angeles",
// "5000/fixed 1h0m0s" or, for a token bucket of 4000 refilled at 4000 per
// minute, "4000+4000/1m0s".
func (l Limit) String() string {
	switch {
	case l.Calendar:
		name := "<nil>"
		if l.Location != nil {
			name = l.Location.String()
		}
		return fmt.Sprintf("%d/day@%s", l.Units, name)
	case l.Fixed:
		return fmt.Sprintf("%d/fixed %v", l.Units, l.Window)
	case l.refilling():
		return fmt.Sprintf("%d+%d/%v", l.Units, l.Refill, l.Window)
	}
	return fmt.Sprintf("%d/%v", l.Units, l.Window)
}

// Validate reports why the limit cannot be used, or nil. Errors match [ErrInvalid].
func (l Limit) Validate() error {
	switch {
	case l.Units <= 0:
		return invalid("limit "+l.String(), "units must be positive")
	case l.Units > MaxUnits:
		return invalid("limit "+l.String(), fmt.Sprintf("units must be at most %d", int64(MaxUnits)))
	case l.Calendar && l.Location == nil:
		return invalid("limit "+l.String(), "a calendar limit needs a location")
	case l.Calendar && l.Window != 0:
		return invalid("limit "+l.String(), "a calendar limit has no window length")
	case l.Calendar && l.Fixed:
		return invalid("limit "+l.String(), "a limit is a calendar day or a fixed window, not both")
	case !l.Calendar && l.Window.Microseconds() <= 0:
		return invalid("limit "+l.String(), "window must be at least one microsecond")
	case l.Refill < 0:
		return invalid("limit "+l.String(), "refill must be positive, or 0 for a window")
	case l.AsUpstream && !l.refilling():
		return invalid("limit "+l.String(), "only a token bucket refunds as its upstream")
	case l.refilling() && (l.Calendar || l.Fixed):
		return invalid("limit "+l.String(), "a token bucket is neither a calendar day nor a fixed window")
	case l.refilling() && (l.Refill > MaxUnits || float64(l.Units)*float64(l.Window.Microseconds()) > MaxRefillSpan):
		return invalid("limit "+l.String(), fmt.Sprintf("a token bucket's capacity times its period in µs must be at most %d, its refill at most %d (give the rate per a shorter period)", int64(MaxRefillSpan), int64(MaxUnits)))
	}
	return nil
}

// windowKey names the limit's window in Redis keys. Units are left out on
// purpose, and a fixed window's end, and a token bucket's refill: raising
// or lowering a limit, or a new window announced, keeps the log of what
// was spent (or the bucket's level).
func (l Limit) windowKey() string {
	switch {
	case l.Name != "":
		return "n." + keyPart(l.Name)
	case l.Calendar:
		return "day@" + keyPart(l.Location.String())
	case l.Fixed:
		return "f" + l.Window.Truncate(time.Microsecond).String()
	case l.refilling():
		return "r" + l.Window.Truncate(time.Microsecond).String()
	}
	return "w" + l.Window.Truncate(time.Microsecond).String()
}

// sameWindow reports whether l and o name the same window of a bucket (and
// so the same keys), whatever their units; like windowKey, without
// building a string.
func (l Limit) sameWindow(o Limit) bool {
	if l.Name != "" || o.Name != "" {
		return l.Name == o.Name
	}
	if l.Calendar != o.Calendar || l.Fixed != o.Fixed || l.refilling() != o.refilling() {
		return false
	}
	if l.Calendar {
		return l.Location.String() == o.Location.String()
	}
	return l.Window.Truncate(time.Microsecond) == o.Window.Truncate(time.Microsecond)
}

// sliding reports whether the limit is decided as a sliding window: a
// sliding limit, or a fixed one whose end is not known.
func (l Limit) sliding() bool {
	return !l.Calendar && !l.refilling() && (!l.Fixed || l.Ends.IsZero())
}

// A Demand asks for Units of one bucket of a scope, checked against every
// limit in Limits. It is the engine's side of a cost table's costs.Charge,
// which names only the bucket and the units. A decision may carry several
// demands, on several buckets; all are admitted together or not at all.
type Demand struct {
	// Bucket names the counter within the scope, e.g. "pool" or "search".
	Bucket string
	// Units is what the call spends, e.g. 100 for a YouTube search.list. It
	// must be positive and no larger than any of Limits.
	Units int64
	// Limits are the windows the units count in, e.g. a per-day and a
	// per-hour limit. Each window length may appear once per bucket.
	Limits []Limit
	// Pace, when set, spreads the bucket's calendar days and fixed
	// windows over their length (see [Pace]).
	Pace *Pace
	// Shares, when set, divides the bucket's calendar days and fixed
	// windows among tenants (see [Shares]).
	Shares *Shares
	// Tenant names who spends, e.g. "eu-west", for Shares: a decision's
	// demands with shares name the same tenant. It must be set when
	// Shares is.
	Tenant string
}

// validate checks the demand and returns a *CostError when its units can
// never fit one of its limits.
func (c Demand) validate() error {
	if c.Units <= 0 {
		return invalid(fmt.Sprintf("charge of %d units to bucket %q", c.Units, c.Bucket), "units must be positive")
	}
	if len(c.Limits) == 0 {
		return invalid(fmt.Sprintf("charge for bucket %q", c.Bucket), "no limits")
	}
	if err := c.validateFair(); err != nil {
		return err
	}
	for _, l := range c.Limits {
		if err := l.Validate(); err != nil {
			return err
		}
		if c.Units > l.Units {
			return &CostError{Bucket: c.Bucket, Units: c.Units, Limit: l}
		}
	}
	return nil
}
