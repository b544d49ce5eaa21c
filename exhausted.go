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
// said spent) refuses every cost. A resume told by another process
// (notices.go) forgets what it concerns.
type exhausted struct {
	mu sync.RWMutex
	m  map[exhaustedKey]exhaustedUntil
	// epoch counts what was forgotten: a refusal Redis decided before a
	// resume, noted after it, is not remembered (see noteSince).
	epoch uint64
	// noted, when set, is called after each note: remembered refusals
	// need the Transport to listen for resumes.
	noted func()
}

type exhaustedKey struct{ scope, bucket string } // bucket "" for the whole scope

type exhaustedUntil struct {
	until  time.Time
	units  int64 // the fewest units refused; 0 for any (a pause)
	cause  Cause
	reason string // a pause's
}

// maxExhausted bounds the cache; past it, entries that have ended go.
const maxExhausted = 1 << 14

// note remembers, at now, a refusal of units of bucket in scope until
// until, for cause (a pause's with its reason).
func (e *exhausted) note(scope, bucket string, units int64, cause Cause, reason string, until, now time.Time) {
	e.remember(nil, scope, bucket, units, cause, reason, until, now)
}

// noteSince notes a refusal Redis decided after mark returned epoch,
// unless something was forgotten since: the refusal may predate a resume.
func (e *exhausted) noteSince(epoch uint64, scope, bucket string, units int64, cause Cause, reason string, until, now time.Time) {
	e.remember(&epoch, scope, bucket, units, cause, reason, until, now)
}

// mark returns the epoch to give noteSince.
func (e *exhausted) mark() uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.epoch
}

func (e *exhausted) remember(epoch *uint64, scope, bucket string, units int64, cause Cause, reason string, until, now time.Time) {
	if cause.Paused() {
		units = 0
	}
	if e.noted != nil {
		defer e.noted()
	}
	k := exhaustedKey{scope, bucket}
	e.mu.Lock()
	defer e.mu.Unlock()
	if epoch != nil && *epoch != e.epoch {
		return
	}
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
	e.m[k] = exhaustedUntil{until: until, units: units, cause: cause, reason: reason}
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
		return &QuotaError{Endpoint: ep.Name, Scope: scope, Units: ep.Units(), RetryAfter: v.until.Sub(now), Cause: v.cause, Reason: v.reason}, true
	}
	for _, ch := range ep.Charges {
		v, ok := e.m[exhaustedKey{scope, ch.Bucket}]
		if ok && v.until.After(now) && ch.Units >= v.units {
			return &QuotaError{Endpoint: ep.Name, Scope: scope, Bucket: ch.Bucket, Units: ch.Units, RetryAfter: v.until.Sub(now), Cause: v.cause, Reason: v.reason}, true
		}
	}
	return nil, false
}

// forget drops what it reports true for, and starts a new epoch.
func (e *exhausted) forget(drop func(scope, bucket string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.epoch++
	for k := range e.m {
		if drop(k.scope, k.bucket) {
			delete(e.m, k)
		}
	}
}

// live reports whether anything is remembered beyond now.
func (e *exhausted) live(now time.Time) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, v := range e.m {
		if v.until.After(now) {
			return true
		}
	}
	return false
}

// pauses returns the pauses remembered beyond now.
func (e *exhausted) pauses(now time.Time) []exhaustedKey {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []exhaustedKey
	for k, v := range e.m {
		if v.cause.Paused() && v.until.After(now) {
			out = append(out, k)
		}
	}
	return out
}
