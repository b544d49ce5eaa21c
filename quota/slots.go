package quota

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrency caps. A bucket may allow only so many calls in flight at once
// (GitHub: 100 per user), whatever their units: a count of calls under way,
// not of units in a window. Each scope bucket has n slots, kept in Redis so
// that every process shares them. A slot is held from TakeSlot until
// Release, and expires if its process stops renewing it: the Limiter
// renews the slots it holds every SlotRenewal, and a slot not renewed for
// SlotTTL (a process killed, a machine gone) is freed for the others.
// Callers that wait for a slot wait in arrival order across processes: a
// freed slot is handed to the first waiter at once, and its process is
// told by a message on a Redis channel.
const (
	// SlotTTL is how long a slot outlives the last renewal of its
	// process: a dead process's slots are free again within it.
	SlotTTL = 5 * time.Second
	// SlotRenewal is how often a Limiter renews the slots it holds, and
	// how often a waiter looks at the room should a message be lost.
	SlotRenewal = time.Second
)

// A Slot is one of the places a scope bucket has for a call in flight.
// Release it when the call ends. A Slot is safe for concurrent use.
type Slot struct {
	lim  *Limiter
	key  slotKey
	n    int
	id   string
	once sync.Once
	err  error
}

// slotKey names the slots of one bucket of a scope.
type slotKey struct{ scope, bucket string }

// slotKeys are the Redis keys of a scope bucket's slots and waiting room.
func (l *Limiter) slotKeys(k slotKey) []string {
	base := l.scopeKey(k.scope) + keyPart(k.bucket) + ":slots"
	return []string{base, base + ":queue", base + ":alive", base + ":n"}
}

// TakeSlot takes one of n slots of bucket in scope for a call about to be
// made, and holds it, renewed, until Release. With maxWait 0 it takes one
// only if one is free now and no caller waits for one; otherwise it waits
// its turn, in arrival order across processes, up to maxWait (a negative
// maxWait: no bound but ctx's). When no slot comes in time it returns a
// *RefusedError. A Background caller (see WithPriority) waits behind every
// interactive one.
func (l *Limiter) TakeSlot(ctx context.Context, scope, bucket string, n int, maxWait time.Duration) (*Slot, error) {
	if err := l.check(scope); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, invalid("slots "+strconv.Itoa(n), "a cap must allow at least one call in flight")
	}
	s := &Slot{lim: l, key: slotKey{scope, bucket}, n: n, id: l.entryID(l.seq.Add(1))}
	class := priorityOf(ctx)
	granted, err := s.take(ctx, class, false)
	if err != nil || granted {
		return s.held(granted, err)
	}
	if maxWait == 0 {
		return nil, &RefusedError{Scope: scope}
	}
	if maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxWait)
		defer cancel()
	}
	woken := l.watchers.watch(l, l.slotKeys(s.key)[0], s.id)
	defer l.watchers.unwatch(l.slotKeys(s.key)[0], s.id)
	tick := time.NewTicker(SlotRenewal)
	defer tick.Stop()
	for {
		granted, err := s.take(ctx, class, true)
		if err != nil || granted {
			if err != nil {
				s.leave()
			}
			return s.held(granted, err)
		}
		select {
		case <-woken:
		case <-tick.C:
		case <-ctx.Done():
			// Leave the room; a slot handed over meanwhile goes to the next.
			s.leave()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && maxWait > 0 {
				return nil, &RefusedError{Scope: scope}
			}
			return nil, ctx.Err()
		}
	}
}

// held returns the slot once it is granted, renewed from then on.
func (s *Slot) held(granted bool, err error) (*Slot, error) {
	if err != nil {
		return nil, err
	}
	s.lim.keeper.hold(s)
	return s, nil
}

// take runs slots.lua's take: the slot now, or a place in the room.
func (s *Slot) take(ctx context.Context, class Priority, wait bool) (bool, error) {
	w := "0"
	if wait {
		w = "1"
	}
	v, err := s.run(ctx, "take", s.id, w, class.String())
	if err != nil {
		return false, redisError(ctx, "slot", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return false, &RedisError{Op: "slot", Err: errReply(v)}
	}
	granted, _ := list[0].(int64)
	return granted == 1, nil
}

// run runs slots.lua with the slot's keys, sharing pipelines with other
// calls. A slot granted to a caller that gave up before its answer came is
// given back when the answer comes.
func (s *Slot) run(ctx context.Context, op string, args ...any) (any, error) {
	_, clockArg := s.lim.clockArg()
	argv := append([]any{clockArg, op, s.n, SlotTTL.Microseconds()}, args...)
	reply, late, err := s.lim.runScript(ctx, slotsScript, s.lim.slotKeys(s.key), argv)
	if late != nil && op == "take" {
		go func() {
			<-late.done
			if list, ok := late.reply.([]any); ok && len(list) > 0 && list[0] == int64(1) {
				s.leave()
			}
		}()
	}
	return reply, err
}

// leave takes a waiter out of the room, or frees the slot it was handed
// while it gave up, on a context of its own: the caller's has ended.
func (s *Slot) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = s.run(ctx, "release", s.id)
}

// Release frees the slot for the next caller, in this process or another.
// Only the first call does anything; a slot whose release cannot reach
// Redis expires within SlotTTL.
func (s *Slot) Release(ctx context.Context) error {
	s.once.Do(func() {
		s.lim.keeper.drop(s)
		s.err = s.free(ctx)
	})
	return s.err
}

// keeper renews the slots a Limiter holds, from one goroutine that runs
// only while it holds any: it ends as soon as the last is released.
type keeper struct {
	mu      sync.Mutex
	held    map[slotKey]map[*Slot]struct{}
	running bool
	empty   chan struct{} // told when the last slot is dropped
}

// hold starts renewing s.
func (k *keeper) hold(s *Slot) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held == nil {
		k.held = make(map[slotKey]map[*Slot]struct{})
	}
	if k.held[s.key] == nil {
		k.held[s.key] = make(map[*Slot]struct{})
	}
	k.held[s.key][s] = struct{}{}
	if !k.running {
		k.running, k.empty = true, make(chan struct{}, 1)
		go k.run(s.lim, k.empty)
	}
}

// drop stops renewing s.
func (k *keeper) drop(s *Slot) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.held[s.key], s)
	if len(k.held[s.key]) == 0 {
		delete(k.held, s.key)
	}
	if len(k.held) == 0 && k.running {
		select {
		case k.empty <- struct{}{}:
		default:
		}
	}
}

// run renews every slot held, each SlotRenewal, until none is.
func (k *keeper) run(l *Limiter, empty <-chan struct{}) {
	t := time.NewTicker(SlotRenewal)
	defer t.Stop()
	for {
		renew := true
		select {
		case <-t.C:
		case <-empty:
			// Told that the last slot was dropped: end, unless another
			// was taken meanwhile, whose renewal is then due at the next
			// tick, not now (a slot just taken needs none).
			renew = false
		}
		k.mu.Lock()
		if len(k.held) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		if !renew {
			k.mu.Unlock()
			continue
		}
		batch := make(map[slotKey][]*Slot, len(k.held))
		for key, slots := range k.held {
			for s := range slots {
				batch[key] = append(batch[key], s)
			}
		}
		k.mu.Unlock()
		for _, slots := range batch {
			ids := make([]any, len(slots))
			for i, s := range slots {
				ids[i] = s.id
			}
			ctx, cancel := context.WithTimeout(context.Background(), SlotRenewal)
			_, _ = slots[0].run(ctx, "renew", ids...) // a missed renewal is made up for by the next
			cancel()
		}
	}
}

// watchers wake this process's waiters when a freed slot is handed to
// them: one subscription per Limiter, open only while someone waits.
type watchers struct {
	mu     sync.Mutex
	ps     *redis.PubSub
	byChan map[string]map[string]chan struct{} // channel, waiter id: its bell
}

// watch subscribes to channel for waiter id and returns the bell that
// rings when id is named on it.
func (w *watchers) watch(l *Limiter, channel, id string) <-chan struct{} {
	bell := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byChan == nil {
		w.byChan = make(map[string]map[string]chan struct{})
	}
	if w.byChan[channel] == nil {
		w.byChan[channel] = make(map[string]chan struct{})
		if w.ps == nil {
			w.ps = l.client.Subscribe(context.Background(), channel)
			go w.listen(w.ps)
		} else {
			_ = w.ps.Subscribe(context.Background(), channel)
		}
	}
	w.byChan[channel][id] = bell
	return bell
}

// unwatch forgets waiter id, and closes the subscription when nobody
// waits any more.
func (w *watchers) unwatch(channel, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byChan[channel], id)
	if len(w.byChan[channel]) > 0 {
		return
	}
	delete(w.byChan, channel)
	if w.ps == nil {
		return
	}
	if len(w.byChan) == 0 {
		_ = w.ps.Close()
		w.ps = nil
		return
	}
	_ = w.ps.Unsubscribe(context.Background(), channel)
}

// listen rings the bells of the waiters named on ps until it closes.
func (w *watchers) listen(ps *redis.PubSub) {
	for msg := range ps.Channel() {
		w.mu.Lock()
		if bell, ok := w.byChan[msg.Channel][msg.Payload]; ok {
			select {
			case bell <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
	}
}
