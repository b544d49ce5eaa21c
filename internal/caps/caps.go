// Package caps takes and keeps the slots a process's requests hold in
// flight: the slots of caps on requests in flight (Bucket.MaxInFlight), and
// the gates of buckets still learning their limit. A request takes a slot
// of each capped bucket it charges before its units are decided, so that
// it is sent as soon as they are, and holds the slots until its response
// body is read to its end or closed, or it fails. Held keeps the slots
// held, so that they are given back when the process closes.
package caps

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Take takes a slot of each of buckets in scope, under its cap in caps,
// waiting up to maxWait for them (0: only if free now; negative: no bound
// but ctx's), in the order of the buckets' names, so that two requests
// never wait for each other's slots, and returns them appended to dst. It
// sorts buckets. When a slot is not had it gives back those it took, and
// returns the bucket that failed and the limiter's error (quota.ErrRefused
// when no slot was free in time). The wait is bounded by the wall clock:
// it is a context's deadline.
func Take(ctx context.Context, lim *quota.Limiter, scope string, buckets []string, caps map[string]int, maxWait time.Duration, dst []*quota.Slot) ([]*quota.Slot, string, error) {
	slices.Sort(buckets)
	start := time.Now()
	if dst == nil {
		dst = make([]*quota.Slot, 0, len(buckets))
	}
	slots := dst
	for _, b := range buckets {
		left := maxWait
		if maxWait > 0 {
			left = max(maxWait-time.Since(start), time.Microsecond)
		}
		s, err := lim.TakeSlot(ctx, scope, b, caps[b], left)
		if err != nil {
			Release(ctx, slots[len(dst):])
			return dst, b, err
		}
		slots = append(slots, s)
	}
	return slots, "", nil
}

// Release gives slots back, on a context of their own: the request's may
// have ended. A slot that cannot be given back expires with its TTL.
func Release(ctx context.Context, slots []*quota.Slot) {
	if len(slots) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, s := range slots {
		_ = s.Release(cctx)
	}
}

// An Owner is what a held slot belongs to.
type Owner struct {
	Scope, Bucket string
	// Gate reports a gate of a bucket learning its limit, not a cap's
	// slot.
	Gate bool
}

// Held are the slots of a process's requests still in flight. The zero
// value holds none; it is safe for concurrent use.
type Held struct {
	mu    sync.Mutex
	slots map[*quota.Slot]Owner
}

// Add holds slots of scope: a cap's, of the buckets in the same order, or,
// with gate, the gates of those buckets.
func (h *Held) Add(slots []*quota.Slot, scope string, buckets []string, gate bool) {
	if len(slots) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == nil {
		h.slots = make(map[*quota.Slot]Owner)
	}
	for i, s := range slots {
		h.slots[s] = Owner{Scope: scope, Bucket: buckets[i], Gate: gate}
	}
}

// Remove forgets slots, and returns the owners of the caps' slots among
// them that were held until now.
func (h *Held) Remove(slots []*quota.Slot) []Owner {
	h.mu.Lock()
	defer h.mu.Unlock()
	var caps []Owner
	for _, s := range slots {
		if k, ok := h.slots[s]; ok && !k.Gate {
			caps = append(caps, k)
		}
		delete(h.slots, s)
	}
	return caps
}

// ReleaseAll gives back every slot still held, and returns the owners of
// the caps' slots among them.
func (h *Held) ReleaseAll(ctx context.Context) ([]Owner, error) {
	h.mu.Lock()
	slots := h.slots
	h.slots = nil
	h.mu.Unlock()
	var errs []error
	var caps []Owner
	for s, k := range slots {
		errs = append(errs, s.Release(ctx))
		if !k.Gate {
			caps = append(caps, k)
		}
	}
	return caps, errors.Join(errs...)
}

// Refused reports whether err says no slot was free in time.
func Refused(err error) bool { return errors.Is(err, quota.ErrRefused) }
