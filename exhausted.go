package tollgate

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/costs"
)

// exhausted remembers, per scope and bucket, until when Redis said a cost
// cannot fit, so that requests whose policy fails fast are refused in this
// process without a round trip until then. What Redis said stays true for
// at least that long for any charge as large, with one exception the cache
// accepts: a hold cancelled elsewhere may free units sooner, and this
// process then refuses until the instant it was told. A pause (the upstream
// said spent) refuses every cost.
type exhausted struct {
	mu sync.RWMutex
	m  map[exhaustedKey]exhaustedUntil
}

type exhaustedKey struct{ scope, bucket string } // bucket "" for the whole scope

type exhaustedUntil struct {
	until  time.Time
	units  int64 // the fewest units refused; 0 for any (a pause)
	paused bool
}

// maxExhausted bounds the cache; past it, entries that have ended go.
const maxExhausted = 1 << 14

// note remembers, at now, a refusal of units of bucket in scope until
// until.
func (e *exhausted) note(scope, bucket string, units int64, paused bool, until, now time.Time) {
	if paused {
		units = 0
	}
	k := exhaustedKey{scope, bucket}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[exhaustedKey]exhaustedUntil)
	}
	if len(e.m) >= maxExhausted {
		for k, v := range e.m {
			if !v.until.After(now) {
				delete(e.m, k)
			}
		}
	}
	old, ok := e.m[k]
	if ok && old.until.After(until) && old.units <= units {
		return // what is known already says more
	}
	e.m[k] = exhaustedUntil{until: until, units: units, paused: paused}
}

// check returns a refusal for the endpoint's charges in scope, when one is
// known to hold now.
func (e *exhausted) check(scope string, ep costs.Endpoint, now time.Time) (*QuotaError, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if len(e.m) == 0 {
		return nil, false
	}
	if v, ok := e.m[exhaustedKey{scope, ""}]; ok && v.until.After(now) {
		return &QuotaError{Endpoint: ep.Name, Scope: scope, Units: ep.Units(), RetryAfter: v.until.Sub(now), Upstream: v.paused}, true
	}
	for _, ch := range ep.Charges {
		v, ok := e.m[exhaustedKey{scope, ch.Bucket}]
		if ok && v.until.After(now) && ch.Units >= v.units {
			return &QuotaError{Endpoint: ep.Name, Scope: scope, Bucket: ch.Bucket, Units: ch.Units, RetryAfter: v.until.Sub(now), Upstream: v.paused}, true
		}
	}
	return nil, false
}
