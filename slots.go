package tollgate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Caps on requests in flight (Bucket.MaxInFlight). A request takes a slot of
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
				return nil, &QuotaError{Endpoint: c.endpoint.Name, Scope: scope, Bucket: b, Cause: CapFull}
			}
			return nil, limiterError(d, c, scope, err)
		}
		slots = append(slots, s)
	}
	t.held.add(slots, scope, buckets)
	if t.cfg.OnSlot != nil {
		for _, b := range buckets {
			t.cfg.OnSlot(scope, b, true)
		}
	}
	return slots, nil
}

// releaseSlots gives slots back, on a context of their own: the request's
// may have ended. A slot that cannot be given back expires with its TTL.
func (t *Transport) releaseSlots(ctx context.Context, slots []*quota.Slot) {
	if len(slots) == 0 {
		return
	}
	t.gaveBack(t.held.remove(slots))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, s := range slots {
		_ = s.Release(cctx)
	}
}

// gaveBack tells the slot hook of the caps' slots given back.
func (t *Transport) gaveBack(caps []heldSlot) {
	if t.cfg.OnSlot != nil {
		for _, k := range caps {
			t.cfg.OnSlot(k.scope, k.bucket, false)
		}
	}
}

// heldSlots are the slots of the Transport's requests still in flight:
// those of caps, with their scope and bucket for the slot hook, and the
// gates of buckets still learning their limit.
type heldSlots struct {
	mu    sync.Mutex
	slots map[*quota.Slot]heldSlot
}

// heldSlot is what a held slot belongs to; a gate's bucket is "".
type heldSlot struct{ scope, bucket string }

// add holds slots; buckets are those of a cap's slots, in the same order,
// and nil for gates.
func (h *heldSlots) add(slots []*quota.Slot, scope string, buckets []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == nil {
		h.slots = make(map[*quota.Slot]heldSlot)
	}
	for i, s := range slots {
		k := heldSlot{scope: scope}
		if buckets != nil {
			k.bucket = buckets[i]
		}
		h.slots[s] = k
	}
}

// remove forgets slots, and returns what the caps' slots among them, that
// were held until now, belong to.
func (h *heldSlots) remove(slots []*quota.Slot) []heldSlot {
	h.mu.Lock()
	defer h.mu.Unlock()
	var caps []heldSlot
	for _, s := range slots {
		if k, ok := h.slots[s]; ok && k.bucket != "" {
			caps = append(caps, k)
		}
		delete(h.slots, s)
	}
	return caps
}

// releaseAll gives back every slot still held, and returns what the caps'
// slots among them belonged to.
func (h *heldSlots) releaseAll(ctx context.Context) ([]heldSlot, error) {
	h.mu.Lock()
	slots := h.slots
	h.slots = nil
	h.mu.Unlock()
	var errs []error
	var caps []heldSlot
	for s, k := range slots {
		errs = append(errs, s.Release(ctx))
		if k.bucket != "" {
			caps = append(caps, k)
		}
	}
	return caps, errors.Join(errs...)
}
