package notices

import (
	"context"
	"sync"

	"github.com/tollgate/tollgate/quota"
)

// A Waiter is a request waiting for a hold's turn or a cap's slot, for a
// pause to reach.
type Waiter struct {
	Scope   string
	Buckets []string
	Hold    *quota.Reservation // nil while it waits for a slot
	Stop    context.CancelCauseFunc
}

// Waiters are a process's requests that wait. The zero value holds none;
// it is safe for concurrent use.
type Waiters struct {
	mu      sync.Mutex
	m       map[*Waiter]struct{}
	resumes uint64 // resumes taken
}

// Resumes counts the resumes Take has been given: a request that took its
// hold before a resume and was added after it was not reached by it.
func (ws *Waiters) Resumes() uint64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.resumes
}

// Add registers w.
func (ws *Waiters) Add(w *Waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = make(map[*Waiter]struct{})
	}
	ws.m[w] = struct{}{}
}

// Remove forgets w, and reports whether it was there: false when a pause
// took it (Take), and is about to stop it.
func (ws *Waiters) Remove(w *Waiter) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_, ok := ws.m[w]
	delete(ws.m, w)
	return ok
}

// Take forgets and returns the waiters a notice concerns, with the bucket
// it concerns of each ("" for the whole scope). For a resume, it takes
// only the waiters that hold a hold: those a pause may have dated after
// its end; a request waiting for a slot is not behind a pause.
func (ws *Waiters) Take(n quota.Notice) map[*Waiter]string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out map[*Waiter]string
	if n.Resume {
		ws.resumes++
	}
	for w := range ws.m {
		if n.Resume && w.Hold == nil {
			continue
		}
		bucket, ok := "", n.Concerns(w.Scope, "")
		for _, b := range w.Buckets {
			if !ok && n.Concerns(w.Scope, b) {
				bucket, ok = b, true
			}
		}
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[*Waiter]string)
		}
		out[w] = bucket
		delete(ws.m, w)
	}
	return out
}
