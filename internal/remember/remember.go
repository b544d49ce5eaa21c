// Package remember keeps, per scope and bucket, the refusals and pauses a
// process was told, until when they hold, so that requests whose policy
// fails fast are refused without a round trip until then. What Redis said
// stays true for at least that long for any charge as large, with one
// exception the cache accepts: a hold cancelled elsewhere may free units
// sooner, and the process then refuses until the instant it was told. A
// pause refuses every cost. A resume told by another process forgets what
// it concerns.
//
// It knows nothing of the errors its users build: a Refusal carries their
// word for why (Cause) as it was given.
package remember

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/costs"
)

// A Refusal is one remembered refusal, or a pause.
type Refusal struct {
	// Units are the fewest units refused; 0 for any (a pause).
	Units int64
	// Until is when it ends, on the clock of the instants given to Note.
	Until time.Time
	// Cause is the caller's word for why, kept as given.
	Cause uint8
	// Pause reports a pause: it refuses every cost.
	Pause bool
	// Reason is a pause's reason.
	Reason string
}

// A Key names what a refusal holds for: a scope's bucket, or the whole
// scope (Bucket "").
type Key struct{ Scope, Bucket string }

// Refusals is the cache. The zero value is empty and ready; it is safe for
// concurrent use.
type Refusals struct {
	mu sync.RWMutex
	m  map[Key]Refusal
	// epoch counts what was forgotten: a refusal Redis decided before a
	// resume, noted after it, is not remembered (see NoteSince).
	epoch uint64
	// Noted, when set, is called after each note: remembered refusals
	// need their process to listen for resumes.
	Noted func()
}

// maxEntries bounds the cache; past it, entries that have ended go.
const maxEntries = 1 << 14

// Note remembers, at now, refusal r of k.
func (e *Refusals) Note(k Key, r Refusal, now time.Time) { e.remember(nil, k, r, now) }

// NoteSince notes a refusal Redis decided after Mark returned epoch,
// unless something was forgotten since: the refusal may predate a resume.
func (e *Refusals) NoteSince(epoch uint64, k Key, r Refusal, now time.Time) {
	e.remember(&epoch, k, r, now)
}

// Mark returns the epoch to give NoteSince.
func (e *Refusals) Mark() uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.epoch
}

func (e *Refusals) remember(epoch *uint64, k Key, r Refusal, now time.Time) {
	if r.Pause {
		r.Units = 0
	}
	if e.Noted != nil {
		defer e.Noted()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if epoch != nil && *epoch != e.epoch {
		return
	}
	if e.m == nil {
		e.m = make(map[Key]Refusal)
	}
	if len(e.m) >= maxEntries {
		for k, v := range e.m {
			if !v.Until.After(now) {
				delete(e.m, k)
			}
		}
	}
	old, ok := e.m[k]
	if ok && old.Until.After(r.Until) && old.Units <= r.Units {
		return // what is known already says more
	}
	e.m[k] = r
}

// Check returns a refusal of the endpoint's charges in scope known to hold
// at now, with the bucket it holds for ("" for the whole scope).
func (e *Refusals) Check(scope string, ep costs.Endpoint, now time.Time) (bucket string, r Refusal, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if len(e.m) == 0 {
		return "", Refusal{}, false
	}
	if v, ok := e.m[Key{scope, ""}]; ok && v.Until.After(now) {
		return "", v, true
	}
	for _, ch := range ep.Charges {
		v, ok := e.m[Key{scope, ch.Bucket}]
		if ok && v.Until.After(now) && ch.Units >= v.Units {
			return ch.Bucket, v, true
		}
	}
	return "", Refusal{}, false
}

// Paused returns the pause known to hold at now for bucket in scope, or for
// the whole scope.
func (e *Refusals) Paused(scope, bucket string, now time.Time) (Refusal, bool) {
	_, r, ok := e.Check(scope, costs.Endpoint{Charges: []costs.Charge{{Bucket: bucket}}}, now)
	return r, ok
}

// Forget drops what drop reports true for, and starts a new epoch.
func (e *Refusals) Forget(drop func(Key) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.epoch++
	for k := range e.m {
		if drop(k) {
			delete(e.m, k)
		}
	}
}

// Live reports whether anything is remembered beyond now.
func (e *Refusals) Live(now time.Time) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, v := range e.m {
		if v.Until.After(now) {
			return true
		}
	}
	return false
}

// Pauses returns the pauses remembered beyond now.
func (e *Refusals) Pauses(now time.Time) []Key {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []Key
	for k, v := range e.m {
		if v.Pause && v.Until.After(now) {
			out = append(out, k)
		}
	}
	return out
}
