// Package web is the operators' page of `tollgate web`: per scope and
// bucket, a chart of each window drawn by the server as SVG, the pauses,
// what waits and what is under way, and (with an operator token) pause and
// resume buttons.
//
// The page renders a Page, which the command fills from what status reads
// (its report); the fields marked "seam" are filled by readers that come
// later (forecasts, who spends, the record of operators' actions) and are
// drawn whenever they are set. Everything is embedded: the page fetches
// nothing from outside and works on a machine with no network.
package web

import (
	"context"
	"time"
)

// Page is what the page shows, read at one instant. A Server renders the
// Page its Options.Read returns, once per request.
type Page struct {
	// At is the instant it was read at, on the clock the decisions use.
	At time.Time
	// Prefix is the key prefix of the quotas shown, e.g. "tollgate:".
	Prefix string
	// Scopes are the scopes found, in the order shown.
	Scopes []Scope
	// Actions is the record of operators' actions, newest first (the
	// command reads them from Redis with quota/ops).
	Actions []Action
}

// Scope is one scope of a Page.
type Scope struct {
	// Name is the scope's name, e.g. "project-a".
	Name string
	// Hashed reports that the keys hold a hash of the name and no process
	// described a bucket of it: its windows are listed by name only.
	Hashed bool
	// Pause is the scope's pause in force, nil when none.
	Pause *Pause
	// BackgroundWaiting is the background requests waiting their turn.
	BackgroundWaiting int
	// Buckets are the scope's buckets.
	Buckets []Bucket
	// Err is why the scope could not be read, e.g. a key holding a value
	// of a format this tollgate cannot read; "" when it was. The page
	// shows it in the scope's place.
	Err string
}

// Pause is a pause in force.
type Pause struct {
	// Until is when spending may resume.
	Until time.Time
	// Reason is why, as its writer said, e.g. "deploy rollback".
	Reason string
}

// Bucket is one bucket of a Scope.
type Bucket struct {
	// Name is the bucket's name, e.g. "pool".
	Name string
	// Announced names the upstream's announcement the first limit
	// follows, e.g. "x-ratelimit"; "" when none.
	Announced string
	// Pause is the bucket's own pause in force, nil when none.
	Pause *Pause
	// Windows are the bucket's limits, as described by the processes.
	Windows []Window
	// Undescribed names windows found with no limit described for them.
	Undescribed []string
	// Leases is the leases out, Leased their units, LeasedUntil when the
	// last ends (zero when none is out).
	Leases      int
	Leased      int64
	LeasedUntil time.Time
	// InFlight is the concurrency slots held, InFlightCap the cap (0:
	// none), SlotWaiting the requests waiting for a slot.
	InFlight    int
	InFlightCap int
	SlotWaiting int
	// Waiting is the requests waiting for room and the oldest wait, as
	// the processes report them (internal/spend); nil when none reports
	// on the bucket.
	Waiting *Waiting
	// Spenders are the top spenders, most first, from the same reports.
	Spenders []Spender
	// SpendSpan is how far back the Spenders' units go, e.g. 1m0s.
	SpendSpan time.Duration
}

// Window is one limit of a Bucket.
type Window struct {
	// Name names the window, e.g. "day America/Los_Angeles".
	Name string
	// Limit is the units tollgate lets through; Quota the upstream's
	// units behind it (0: not told), so Quota-Limit is the reserve.
	Limit int64
	Quota int64
	// Used is the units admitted and spent in the window now; Held, apart,
	// the units held for requests waiting for room, dated later;
	// Remaining the room left for new requests.
	Used      int64
	Held      int64
	Remaining int64
	// Start and End bound the window the chart spans: for a calendar day
	// its midnights, for a sliding window of length W [At-W, At]. A zero
	// Start draws no time axis, but a bar (a token bucket).
	Start time.Time
	End   time.Time
	// NextFree is when the oldest counted units leave; Reset when all
	// have (a token bucket: when it is full again). Zero when not known.
	NextFree time.Time
	Reset    time.Time
	// Zone is where instants of the window are shown (a calendar day's
	// zone); nil shows UTC.
	Zone *time.Location
	// Refill and Period make the window a token bucket: Refill units per
	// Period, e.g. 4000 per "1m0s". Refill is 0 for a window.
	Refill int64
	Period string
	// Sliding reports a sliding window: its chart ends at now (End is
	// At) and draws no forecast, which its sentence says.
	Sliding bool
	// Series is what was spent over the window, slice by slice, oldest
	// first (seam: the reader of the window's slice log); slices dated
	// after At (holds of waiting requests) are not drawn.
	Series []Point
	// Forecast is where the window is heading at the current rate (seam:
	// internal/forecast); nil draws none.
	Forecast *Forecast
	// Paced draws the window's pace line (tollgate.Bucket.Pace), from
	// PaceBurst units at Start to Limit at End.
	Paced     bool
	PaceBurst int64
	// Tenants are what each tenant of a window with shares
	// (tollgate.Bucket.Shares) spent in it, by name; none without shares.
	Tenants []Tenant
}

// Tenant is one tenant of a Window with shares.
type Tenant struct {
	// Name is the tenant, e.g. "eu-west".
	Name string
	// Units is what it spent in the window; Share its share of the
	// window by now, e.g. 48.5; Held what it holds in later windows.
	Units int64
	Share float64
	Held  int64
	// Waiting is how many of its requests wait in the bucket's room
	// (those of a tenant at or above its share), e.g. 2.
	Waiting int
}

// Point is one slice of a window's log: the units admitted in the slice
// that starts at At. The chart draws their running total.
type Point struct {
	At    time.Time
	Units int64
}

// Forecast is a window's forecast at the current rate of spending.
type Forecast struct {
	// Rate is the units spent per second now, measured over Span.
	Rate float64
	Span time.Duration
	// Spent is when the window would be spent at Rate; zero when not
	// before its units come back.
	Spent time.Time
	// AtRisk reports that the window is spent at Rate before its units
	// come back: only then is the sentence in the warning colour.
	AtRisk bool
	// Text says it in words, e.g. "at this rate, spent at 14:05 PDT,
	// 9h58m before the reset".
	Text string
}

// Spender is one name's spending in a bucket's current windows.
type Spender struct {
	// Name is the Transport's (or the gateway caller's) name, e.g.
	// "ingest-7@host1".
	Name string
	// Units is what it spent of the bucket in the span its report
	// covers (Bucket.SpendSpan).
	Units int64
	// Endpoint is where most went, e.g. "search.list"; "" when not told.
	Endpoint string
}

// Waiting is the requests waiting for room in a bucket.
type Waiting struct {
	Requests int
	// Oldest is how long the oldest has waited.
	Oldest time.Duration
}

// Action is one operator's action: what the page records on each pause
// and resume, and what the record of operators' actions shows.
type Action struct {
	// At is when it was done.
	At time.Time
	// By is who did it, as the operator typed it, e.g. "alice".
	By string
	// Via is where from, e.g. "web 127.0.0.1:53412" or "cli".
	Via string
	// What is "pause" or "resume" (from the page), or "spend".
	What string
	// Scope and Bucket are what it was done to; Bucket "" is the whole
	// scope.
	Scope  string
	Bucket string
	// For is a pause's length; Units the units a spend recorded; Why the
	// reason given.
	For   time.Duration
	Units int64
	Why   string
}

// Recorder receives each action done from the page, after it is done,
// on the request's goroutine: the seam of the record of operators'
// actions. The Server also logs each action; an error is logged, not
// shown as the action's failure (the action was done).
type Recorder func(ctx context.Context, a Action) error

// Control does what the page's buttons ask, in every process sharing the
// quotas, as `tollgate pause` and `tollgate resume` do. An error is shown
// to the operator; it must not carry a secret.
type Control interface {
	// Pause pauses bucket of scope (the scope for "") for d, saying why.
	Pause(ctx context.Context, scope, bucket string, d time.Duration, reason string) error
	// Resume lifts the pauses of bucket of scope (the scope and every
	// bucket in it for "").
	Resume(ctx context.Context, scope, bucket string) error
}
