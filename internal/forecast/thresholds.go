package forecast

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A Key names one window: of a scope's bucket, named as its reader names
// it (e.g. quota.Limit's String, "9500/day@America/Los_Angeles").
type Key struct {
	// Scope is the quota pool, e.g. "yt-project-1".
	Scope string
	// Bucket is the counter within it, e.g. "pool".
	Bucket string
	// Window names the window among the bucket's, e.g. "day@America/Los_Angeles".
	Window string
}

// A Crossing is a threshold of a window's limit crossed.
type Crossing struct {
	// Key is the window.
	Key Key
	// Threshold is the fraction of the limit crossed, e.g. 0.8.
	Threshold float64
	// Used and Units are the count and the limit seen, e.g. 7610 of 9500.
	Used, Units int64
	// At is the instant of the Usage that showed it.
	At time.Time
}

// Thresholds reports the crossings of fractions of windows' limits (say
// 80% and 95%), each once per crossing of each window. A threshold
// crossed is armed again when the window's count falls below it, and
// when a calendar or fixed window resets. It is safe for concurrent use
// by multiple goroutines. It keeps a little state per window it has seen:
// the windows a process has are few and known.
type Thresholds struct {
	levels []float64

	mu   sync.Mutex
	seen map[Key]*armed
}

// armed is a window's state: the window instance it is in (the start of
// a calendar or fixed window; zero for a sliding one) and which
// thresholds have fired in it.
type armed struct {
	start time.Time
	fired []bool
}

// NewThresholds returns a detector of the given fractions of a limit, each
// in (0, 1], e.g. NewThresholds(0.8, 0.95). Their order does not matter.
func NewThresholds(levels ...float64) (*Thresholds, error) {
	if len(levels) == 0 {
		return nil, fmt.Errorf("forecast: no threshold given")
	}
	ls := slices.Clone(levels)
	for _, l := range ls {
		if !(l > 0 && l <= 1) {
			return nil, fmt.Errorf("forecast: threshold %v is not a fraction in (0, 1]", l)
		}
	}
	slices.Sort(ls)
	return &Thresholds{levels: slices.Compact(ls), seen: make(map[Key]*armed)}, nil
}

// Observe reads a status of window k and returns the thresholds it has
// crossed since it was last seen below them, lowest first; nil when none.
// A Usage older than the window instance k is already in (a late reader)
// is ignored.
func (t *Thresholds) Observe(k Key, u quota.Usage) []Crossing {
	if u.Limit.Units <= 0 {
		return nil
	}
	var start time.Time
	if !sliding(u.Limit) && u.Limit.Refill <= 0 {
		start, _ = bounds(u.Limit, u.Now)
	}
	frac := float64(u.Used) / float64(u.Limit.Units)

	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.seen[k]
	switch {
	case a == nil || a.start.Before(start):
		a = &armed{start: start, fired: make([]bool, len(t.levels))}
		t.seen[k] = a
	case start.Before(a.start):
		return nil
	}
	var out []Crossing
	for i, l := range t.levels {
		switch {
		case frac < l:
			a.fired[i] = false
		case !a.fired[i]:
			a.fired[i] = true
			out = append(out, Crossing{Key: k, Threshold: l, Used: u.Used, Units: u.Limit.Units, At: u.Now})
		}
	}
	return out
}
