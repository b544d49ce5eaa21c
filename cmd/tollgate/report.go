package main

import (
	"time"

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

// optional is an instant for -json: nil when zero, else in UTC, so that
// the report reads the same whatever the machine's zone.
func optional(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
