package tollgate

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/meter"
	"github.com/tollgate/tollgate/quota"
)

// A request is one request on its way through the Transport, from
// RoundTrip's entry to its response's end: what it asks for, how it was
// admitted, and what it holds that must be given back. Every stage of the
// path reads and writes this one value.
type request struct {
	req        *http.Request
	endpoint   costs.Endpoint
	scope      string
	policy     Policy
	now        time.Time // the instant of its entry (or of its new decision), on the Transport's clock
	background bool      // its policy or its context says Background

	// How it was admitted (or refused), and by whom.
	kind     admission
	shadowed bool     // sent by the Shadow action although refused
	by       *decider // the limiter that decided; nil when none did
	route    *Route   // the failover route admitted, if any
	res      *quota.Reservation
	at       time.Time // the local instant its units count from: with res, on the wall clock (Transit's); from a lease, its instant

	// What it holds, in the order taken: gates, then slots, then units
	// (res); release gives them back in reverse order. The gates (of
	// buckets still learning their limit, held until the response's
	// headers are read) are the first gates of held; the slots (of capped
	// buckets, held until the response ends) the rest. One slice, so that
	// the request fits a smaller allocation.
	held  []*quota.Slot
	gates uint16

	t *Transport // for the readers of its response's body
}

// slots returns the slots of capped buckets the request holds.
func (r *request) slots() []*quota.Slot { return r.held[r.gates:] }

// An admission is how a request was admitted, or refused.
type admission uint8

const (
	undecided  admission = iota // nothing decided it (yet)
	admitFree                   // a free request: Redis was not asked
	fromLease                   // spent from this process's lease
	decided                     // by a limiter (by): reserved, held by its slots alone, or refused
	unmetered                   // sent with no decision: Redis down, the endpoint fails open
	remembered                  // refused by a refusal or pause this process remembers
)

// decide marks the request admitted (or refused) by kind on d.
func (r *request) decide(kind admission, d *decider) { r.kind, r.by = kind, d }

// forget clears what a decision admitted, before the request is decided
// again; what it held was given back.
func (r *request) forget() {
	r.kind, r.shadowed, r.by, r.route, r.res, r.at, r.held, r.gates = undecided, false, nil, nil, nil, time.Time{}, nil, 0
}

// spending returns the pool the request spends from: its route's, or its
// own.
func (r *request) spending() string {
	if r.route != nil && r.route.Scope != "" {
		return r.route.Scope
	}
	return r.scope
}

// local reports a decision by the FailLocal mode's limiter.
func (r *request) local() bool { return r.by != nil && r.by.local }

// refused builds the *QuotaError of the request in scope: this is the one
// place that builds one. Its Units are what it charges bucket (all its
// units when bucket is "", none when a cap's slot refused it).
func (r *request) refused(scope, bucket string, cause Cause, retryAfter time.Duration, reason string) *QuotaError {
	qe := &QuotaError{Endpoint: r.endpoint.Name, Scope: scope, Bucket: bucket, RetryAfter: retryAfter, Cause: cause, Reason: reason}
	switch {
	case cause == CapFull:
	case bucket == "":
		qe.Units = r.endpoint.Units()
	default:
		qe.Units = unitsOf(r.endpoint, bucket)
	}
	return qe
}

// unitsOf returns the units an endpoint charges to bucket.
func unitsOf(e costs.Endpoint, bucket string) int64 {
	for _, ch := range e.Charges {
		if ch.Bucket == bucket {
			return ch.Units
		}
	}
	return 0
}

// holding names what a request holds, for release.
type holding uint8

const (
	heldGates holding = 1 << iota
	heldSlots
	heldUnits
	heldAll = heldGates | heldSlots | heldUnits
)

// Ended gives back the slots of a request whose response body ended, after
// settling the true cost it told (settle.go).
func (r *request) Ended(told []meter.Cost, _ bool) {
	ctx := r.req.Context()
	r.t.settling.settle(ctx, r, told, r.slots()...) // the slots freed in the settlement's round trip
	r.t.gates.release(ctx, r, heldSlots)
}
