package tollgate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Caps on requests in flight (Bucket.InFlight). A request takes a slot of
// each capped bucket it charges before its units are decided, so that it
// is sent as soon as they are, and holds the slots until its response body
// is read to its end or closed (response.go), or it fails. The Transport
// keeps the slots it holds, to give them back when it closes.

// capped reports whether the call charges a bucket with a cap.
func (t *Transport) capped(c *call) bool {
	for _, ch := range c.endpoint.Charges {
		if t.redis.caps[ch.Bucket] > 0 {
			return true
		}
	}
	return false
}

// takeSlots takes a slot of every capped bucket the call charges in scope,
// waiting up to maxWait for them (0: only if free now; negative: no bound
// but ctx's), in the order of the buckets' names, so that two requests
// never wait for each other's slots. When a slot is not free in time it
// gives back those it took and returns a *QuotaError naming the bucket.
func (t *Transport) takeSlots(ctx context.Context, d *decider, c *call, scope string, maxWait time.Duration) ([]*quota.Slot, error) {
	var buckets []string
	for _, ch := range c.endpoint.Charges {
		if d.caps[ch.Bucket] > 0 {
			buckets = append(buckets, ch.Bucket)
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	slices.Sort(buckets)
	start := time.Now()
	slots := make([]*quota.Slot, 0, len(buckets))
	for _, b := range buckets {
		left := maxWait
		if maxWait > 0 {
			left = max(maxWait-time.Since(start), time.Microsecond)
		}
		s, err := d.lim.TakeSlot(ctx, scope, b, d.caps[b], left)
		if err != nil {
			t.releaseSlots(ctx, slots)
			if errors.Is(err, quota.ErrRefused) {
				return nil, &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Bucket: b}
			}
			return nil, limiterError(d, c, scope, err)
		}
		slots = append(slots, s)
	}
	t.held.add(slots)
	return slots, nil
}

// releaseSlots gives slots back, on a context of their own: the request's
// may have ended. A slot that cannot be given back expires with its TTL.
func (t *Transport) releaseSlots(ctx context.Context, slots []*quota.Slot) {
	if len(slots) == 0 {
		return
	}
	t.held.remove(slots)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, s := range slots {
		_ = s.Release(cctx)
	}
}

// heldSlots are the slots of the Transport's requests still in flight.
type heldSlots struct {
	mu    sync.Mutex
	slots map[*quota.Slot]struct{}
}

func (h *heldSlots) add(slots []*quota.Slot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == nil {
		h.slots = make(map[*quota.Slot]struct{})
	}
	for _, s := range slots {
		h.slots[s] = struct{}{}
	}
}

func (h *heldSlots) remove(slots []*quota.Slot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range slots {
		delete(h.slots, s)
	}
}

// releaseAll gives back every slot still held.
func (h *heldSlots) releaseAll(ctx context.Context) error {
	h.mu.Lock()
	slots := h.slots
	h.slots = nil
	h.mu.Unlock()
	var errs []error
	for s := range slots {
		errs = append(errs, s.Release(ctx))
	}
	return errors.Join(errs...)
}
