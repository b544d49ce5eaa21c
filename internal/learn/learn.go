// Package learn keeps what a process learned of the quotas an upstream
// announces (a bucket's limit, window and reset, per scope), and the holds
// waiting on announced buckets, so that a change of a limit or window
// reaches them: they are given back together, and their requests decide
// again.
package learn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// GateName names, among a scope's slots in Redis, the gate of a bucket
// whose limit is still to be learned: one request at a time goes through
// it until the first announcement.
func GateName(bucket string) string { return "learn." + bucket }

// Key names a scope's bucket.
type Key struct{ Scope, Bucket string }

// Learned is what a process knows of one announced bucket of a scope.
type Learned struct {
	Limit  int64         // the announced limit; 0: not known
	Window time.Duration // the announced window; 0: not stated
	Reset  time.Time     // the newest reset announced, as Redis holds it when it was told
	// Gen counts the changes of limit and window: a request that waited
	// while one changed is decided again.
	Gen uint64
}

// Read takes in a reset this process read: a later one (by tol or more)
// starts a new window, until Redis tells the reading every process keeps
// (Adopt); another reading of the same reset, or an older one, changes
// nothing.
func (l *Learned) Read(reset time.Time, tol time.Duration) {
	if !reset.IsZero() && (l.Reset.IsZero() || reset.Sub(l.Reset) >= tol) {
		l.Reset = reset
	}
}

// Adopt takes in what Redis holds of the bucket's newest announcement,
// which every process reads alike.
func (l *Learned) Adopt(a quota.Announced, tol time.Duration) {
	if l.Reset.Sub(a.Reset) >= tol {
		return // this process read a newer one
	}
	if a.Limit > 0 {
		l.Limit = a.Limit
	}
	if a.Window > 0 {
		l.Window = a.Window
	}
	l.Reset = a.Reset
}

// State holds what was learned, per scope bucket. The zero value knows
// nothing; it is safe for concurrent use.
type State struct {
	mu sync.RWMutex
	m  map[Key]Learned
}

// maxLearned bounds the state; past it, it starts afresh, which costs a
// round trip per scope to learn again.
const maxLearned = 1 << 14

// Get returns what is known of k.
func (s *State) Get(k Key) Learned {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[k]
}

// Update changes what is known of k with f, counting a change of limit or
// window in Gen, and returns it.
func (s *State) Update(k Key, f func(*Learned)) Learned {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxLearned {
		s.m = make(map[Key]Learned)
	}
	l := s.m[k]
	was := l
	f(&l)
	if l.Limit != was.Limit || l.Window != was.Window {
		l.Gen++
	}
	s.m[k] = l
	return l
}

// ErrChanged ends the wait of a hold whose bucket's limit or window an
// announcement changed: the hold was given back, and the request decides
// again under what the announcement said.
var ErrChanged = errors.New("tollgate: an announcement changed the limit the hold was decided under")

// Holds are the requests waiting for holds on announced buckets, per scope
// bucket, so that an announcement that changes a bucket's limit or window
// gives all of their holds back before any of them decides again: one by
// one, each would find the others' outdated holds still counted. The zero
// value holds none; it is safe for concurrent use.
type Holds struct {
	mu sync.Mutex
	m  map[Key]map[*quota.Reservation]context.CancelCauseFunc
}

// Add registers a hold under each of keys, with the function that ends its
// wait.
func (h *Holds) Add(keys []Key, r *quota.Reservation, stop context.CancelCauseFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[Key]map[*quota.Reservation]context.CancelCauseFunc)
	}
	for _, k := range keys {
		if h.m[k] == nil {
			h.m[k] = make(map[*quota.Reservation]context.CancelCauseFunc)
		}
		h.m[k][r] = stop
	}
}

// Remove forgets a hold.
func (h *Holds) Remove(keys []Key, r *quota.Reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		delete(h.m[k], r)
		if len(h.m[k]) == 0 {
			delete(h.m, k)
		}
	}
}

// Redecide gives back the holds waiting on k, together, then ends their
// waits with ErrChanged, to decide again.
func (h *Holds) Redecide(ctx context.Context, k Key) {
	h.mu.Lock()
	held := h.m[k]
	delete(h.m, k)
	h.mu.Unlock()
	if len(held) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range held {
		wg.Go(func() { _ = r.Cancel(cctx) }) // concurrent: the limiter pipelines them
	}
	wg.Wait()
	for _, stop := range held {
		stop(ErrChanged)
	}
}
