package quota

import (
	"context"
	_ "embed"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots taken with a decision. A request that charges units and holds a
// slot of a cap (GitHub's requests do both) would pay a round trip for its
// slot, one for its units and one to give the slot back: ReserveCapped
// takes the slots in the decision's own script, and SettleAndRelease
// frees them in the settlement's. Only the common case is decided there:
// a slot free and nobody waiting for one, where slots.lua would give it at
// once too. Every other goes through slots.lua, as TakeSlot and Release
// go, so that waiters are served in arrival order whichever way a slot
// was taken.

var (
	//go:embed capped.lua
	cappedPart string
	//go:embed letgo.lua
	letGoPart string
)

// A Cap is a concurrency cap a decision takes a slot of (ReserveCapped):
// the same slots as TakeSlot's for its bucket in the decision's scope.
type Cap struct {
	// Bucket names the cap, e.g. "concurrent".
	Bucket string
	// N is how many calls may be in flight at once, e.g. 100.
	N int
}

// ReserveCapped is Reserve (maxWait 0: Allow) that also takes a slot of
// each cap in scope, in the same atomic step: when the reservation is OK,
// the slots are held (renewed until released, as TakeSlot's are) and
// returned in the order of caps; when it is not, none is taken. A slot is
// taken only if it is free now and no caller waits for one; otherwise
// nothing is charged and ReserveCapped returns a *RefusedError naming the
// cap's bucket. In the common case (every slot free, nobody waiting, an
// interactive call on buckets with neither pace nor shares) it costs one
// round trip; otherwise it takes the slots as TakeSlot does, then the
// units, and gives the slots back when the units are refused. Release
// each slot when the call ends, or free them with the settlement
// (SettleAndRelease).
func (l *Limiter) ReserveCapped(ctx context.Context, scope string, maxWait time.Duration, caps []Cap, demands ...Demand) (*Reservation, []*Slot, error) {
	if err := l.check(scope); err != nil {
		return nil, nil, err
	}
	for _, c := range caps {
		if c.N <= 0 {
			return nil, nil, invalid("slots "+strconv.Itoa(c.N)+" of cap "+strconv.Quote(c.Bucket), "a cap must allow at least one call in flight")
		}
	}
	if len(caps) == 0 {
		r, err := l.Reserve(ctx, scope, maxWait, demands...)
		return r, nil, err
	}
	wait := unbounded
	if maxWait >= 0 {
		wait = maxWait.Microseconds()
	}
	if isFair(demands) || priorityOf(ctx) == Background {
		return l.reserveSlotsFirst(ctx, scope, maxWait, caps, demands)
	}
	keys, args, seq, err := l.decision(scope, wait, demands, false)
	if err != nil {
		return nil, nil, err
	}
	keys = withoutBucketLogs(keys, demands)
	// Lean or not as the decision alone would be: the slots' id is no
	// bucket's span, whatever its first letter.
	script := wrapped(leanFor(reserveScript, args), "decide", &cappedPart)
	id := l.entryID(l.seq.Add(1))
	slots := make([]*Slot, len(caps))
	for i, c := range caps {
		slots[i] = &Slot{lim: l, key: slotKey{scope, c.Bucket}, n: c.N, id: id}
		k := l.slotKeys(slots[i].key)
		keys = append(keys, k[0], k[1])
	}
	args = append(args, id, SlotTTL.Microseconds())
	for _, c := range caps {
		args = append(args, c.N)
	}
	args = append(args, len(caps))
	reply, late, err := l.runScript(ctx, script, keys, args)
	l.giveBackLate(late, scope, demands, seq, slots)
	if err != nil {
		return nil, nil, redisError(ctx, "reserve", err)
	}
	if i, waiters, ok := capRefusal(reply); ok {
		if waiters {
			return l.reserveSlotsFirst(ctx, scope, maxWait, caps, demands)
		}
		return nil, nil, &RefusedError{Scope: scope, Bucket: caps[i].Bucket}
	}
	r, err := l.decided(scope, demands, seq, reply)
	if err != nil || !r.ok {
		return r, nil, err
	}
	for _, s := range slots {
		l.keeper.hold(s)
	}
	return r, slots, nil
}

// capRefusal reads capped.lua's reply when a cap had no slot: the cap's
// index from 0, and whether callers wait for its slots.
func capRefusal(reply any) (i int, waiters, ok bool) {
	list, _ := reply.([]any)
	if len(list) != 3 || list[0] != "cap" {
		return 0, false, false
	}
	n, _ := list[1].(int64)
	w, _ := list[2].(int64)
	return int(n) - 1, w == 1, n >= 1
}

// reserveSlotsFirst is ReserveCapped the way round trips apart take it:
// each cap's slot (in the order of the buckets' names, so that two calls
// never wait for each other's), then the units; what it took is given
// back when something is refused.
func (l *Limiter) reserveSlotsFirst(ctx context.Context, scope string, maxWait time.Duration, caps []Cap, demands []Demand) (*Reservation, []*Slot, error) {
	order := make([]int, len(caps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if caps[a].Bucket < caps[b].Bucket {
			return -1
		}
		if caps[a].Bucket > caps[b].Bucket {
			return 1
		}
		return 0
	})
	slots := make([]*Slot, len(caps))
	giveBack := func() {
		for _, s := range slots {
			if s != nil {
				s.Release(context.WithoutCancel(ctx))
			}
		}
	}
	for _, i := range order {
		s, err := l.TakeSlot(ctx, scope, caps[i].Bucket, caps[i].N, 0)
		if err != nil {
			giveBack()
			if re, ok := err.(*RefusedError); ok {
				re.Bucket = caps[i].Bucket
			}
			return nil, nil, err
		}
		slots[i] = s
	}
	r, err := l.Reserve(ctx, scope, maxWait, demands...)
	if err != nil || !r.OK() {
		giveBack()
		return r, nil, err
	}
	return r, slots, nil
}

// SettleAndRelease is SettleAll that also frees slots (those taken with
// the reservation, say) in the same round trip, where nobody waits for
// them; a slot someone waits for is handed to the first waiter, as
// Release hands it. The slots are freed whatever the settlement's
// outcome (and when there is nothing to settle); only the first release
// of a slot does anything, and one that cannot be freed expires within
// SlotTTL. It returns the settlement's error.
func (r *Reservation) SettleAndRelease(ctx context.Context, units map[string]int64, slots ...*Slot) error {
	err := r.settleFreeing(ctx, settleScript, units, slots)
	for _, s := range slots {
		_ = s.Release(ctx) // those the settlement did not free
	}
	return err
}

// runFreeing runs script, whose reply is not read, and frees slots in the
// same round trip (letgo.lua): those still held, and, through slots.lua,
// those callers wait for. With no slot to free it is run.
func (l *Limiter) runFreeing(ctx context.Context, script *redis.Script, keys []string, args []any, slots []*Slot) error {
	var mine []*Slot
	for _, s := range slots {
		if s.claim() {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		_, err := l.run(ctx, script, keys, args...)
		return err
	}
	script = wrapped(leanFor(script, args), "body", &letGoPart)
	keys, args = withSlots(keys, args, mine)
	reply, err := l.run(ctx, script, keys, args...)
	if err != nil {
		for _, s := range mine {
			s.free(context.WithoutCancel(ctx)) // the script wrote nothing of them
		}
		return err
	}
	// A handover that fails leaves the slot free: its first waiter finds
	// it when it next looks (SlotRenewal).
	_ = l.handOver(ctx, reply, mine)
	return nil
}

// withSlots appends the keys and arguments letgo.lua reads of slots.
func withSlots(keys []string, args []any, slots []*Slot) ([]string, []any) {
	for _, s := range slots {
		k := s.lim.slotKeys(s.key)
		keys = append(keys, k[0], k[1])
	}
	for _, s := range slots {
		args = append(args, s.id)
	}
	return keys, append(args, len(slots))
}

// handOver frees through slots.lua the slots letgo.lua's reply names:
// callers wait for them.
func (l *Limiter) handOver(ctx context.Context, reply any, slots []*Slot) error {
	list, _ := reply.([]any)
	var err error
	for _, x := range list[min(1, len(list)):] {
		if i, ok := x.(int64); ok && i >= 1 && int(i) <= len(slots) {
			if _, e := slots[i-1].run(ctx, "release", slots[i-1].id); e != nil && err == nil {
				err = redisError(ctx, "slot", e)
			}
		}
	}
	return err
}

// claim reports whether the caller is the first to free s, and stops its
// renewal.
func (s *Slot) claim() (first bool) {
	s.once.Do(func() {
		first = true
		s.lim.keeper.drop(s)
	})
	return first
}

// free frees s with two commands, no decision's script: its place taken
// off the holders, and the waiters counted after. When callers wait,
// slots.lua hands the free slot to the first. No caller can enter the
// room between the two: one that looks after the first finds the slot
// free and takes it. Where callers share pipelines the two go as a script
// in one (free.lua), which costs Redis less than a round trip of their
// own; else in a round trip of their own, as plain commands. The free is
// not awaited on replicas (WithReplicas): one lost in a failover leaves
// the slot held, unrenewed, for SlotTTL at most, which keeps the cap.
func (s *Slot) free(ctx context.Context) error {
	k := s.lim.slotKeys(s.key)
	var waiting int64
	if s.lim.batch.pipelines > 0 && s.lim.replicas.n == 0 {
		reply, err := s.lim.run(ctx, freeScript, k[:2], s.id)
		if err != nil {
			return redisError(ctx, "slot", err)
		}
		waiting, _ = reply.(int64)
	} else {
		pipe := s.lim.client.Pipeline()
		pipe.ZRem(ctx, k[0], s.id)
		n := pipe.ZCard(ctx, k[1])
		if _, err := pipe.Exec(ctx); err != nil {
			return redisError(ctx, "slot", err)
		}
		waiting = n.Val()
	}
	if waiting == 0 {
		return nil
	}
	if _, err := s.run(ctx, "release", s.id); err != nil {
		return redisError(ctx, "slot", err)
	}
	return nil
}

// wrappedScripts holds the scripts wrapped, by the script and the part
// that ends them.
var wrappedScripts sync.Map // wrapKey: *redis.Script

type wrapKey struct {
	script *redis.Script
	tail   *string
}

// wrapped returns script run as the local function fn, followed by the
// part *tail, which calls it. Made once per script and part.
func wrapped(script *redis.Script, fn string, tail *string) *redis.Script {
	k := wrapKey{script, tail}
	if w, ok := wrappedScripts.Load(k); ok {
		return w.(*redis.Script)
	}
	src, _ := sources.Load(script.Hash())
	w, _ := wrappedScripts.LoadOrStore(k, newScript("local function "+fn+"()\n"+src.(string)+"\nend\n"+*tail))
	return w.(*redis.Script)
}
