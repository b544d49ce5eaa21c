package quota

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// A token bucket that refunds as its upstream (Limit.AsUpstream), checked
// against an independent model of the upstream's bucket: a level refilled
// up to the capacity, a call's estimate taken when it arrives (a 429 were
// the level short), the difference given back when it ends, up to full.

// Its tests run in the token buckets' suite (bucket_test.go): miniredis,
// a redis-server and a 3-master cluster.

// upstreamBucket is the upstream's bucket as Anthropic's rate limits page
// describes its output tokens: a level (units × period µs, exact),
// continuously refilled up to the capacity; a call takes its estimate when
// it arrives and gets back what it did not use when it ends.
type upstreamBucket struct {
	c, r, p int64
	level   int64
	at      int64
	// pending are the calls dated later than the clock reached (holds):
	// the upstream counts them when they arrive.
	pending []pendingCall
	refused int
}

type pendingCall struct {
	id, at, units int64
}

func (m *upstreamBucket) advance(t int64) {
	if t > m.at {
		m.level = min(m.level+(t-m.at)*m.r, m.c*m.p)
		m.at = t
	}
}

// arrive counts the calls due by t, in their order: a call the level
// cannot hold is one the upstream refuses.
func (m *upstreamBucket) arrive(t int64) {
	slices.SortStableFunc(m.pending, func(a, b pendingCall) int { return int(a.at - b.at) })
	for len(m.pending) > 0 && m.pending[0].at <= t {
		x := m.pending[0]
		m.pending = m.pending[1:]
		m.advance(x.at)
		if m.level < x.units*m.p {
			m.refused++
		}
		m.level -= x.units * m.p
	}
	m.advance(t)
}

// giveBack is the correction at t of a call that used units fewer (or,
// negative, more) than it was charged.
func (m *upstreamBucket) giveBack(t, units int64) {
	m.arrive(t)
	m.level = min(m.level+units*m.p, m.c*m.p)
}

// drop forgets a call that never arrived.
func (m *upstreamBucket) drop(id int64) {
	m.pending = slices.DeleteFunc(m.pending, func(x pendingCall) bool { return x.id == id })
}

// debt is what is out of the bucket at t, in units × period µs.
func (m *upstreamBucket) debt(t int64) int64 {
	m.arrive(t)
	return m.c*m.p - m.level
}

// used is what is out of the bucket at t, whole units, as Usage tells it.
func (m *upstreamBucket) used(t int64) int64 {
	out := m.debt(t)
	if out <= 0 {
		return 0
	}
	return (out + m.p - 1) / m.p
}

// debtAt reads the engine's bucket and returns its debt at instant now,
// in units × period µs, holds included (bucket.lua's bucket_debt).
func debtAt(t *testing.T, b *backend, l *Limiter, scope string, lim Limit, now int64) int64 {
	t.Helper()
	v, err := b.client.Get(context.Background(), l.window(scope, "b", lim).meta).Result()
	if err == redis.Nil {
		return 0
	}
	if err != nil || len(v) != 44 || v[:4] != "#3r:" {
		t.Fatalf("the bucket's state: %q, %v", v, err)
	}
	field := func(i int) int64 { return int64(binary.BigEndian.Uint64([]byte(v[4+8*i : 12+8*i]))) }
	u, s, r := field(0), field(1), lim.Refill
	switch {
	case now < u:
		return s + (u-now)*r
	case (now-u)*r >= s:
		return 0
	}
	return s - (now-u)*r
}

// testAsUpstreamRefund: a refund gives back all that the call did not use,
// as the upstream does, where the conservative one gives back that less
// what the bucket refilled meanwhile; a hold given up comes back, a call
// that never reached the upstream after its instant does not.
func testAsUpstreamRefund(t *testing.T, b *backend) {
	ctx := context.Background()
	for _, tc := range []struct {
		upstream bool
		used     int64 // after the late refund
	}{{false, 8}, {true, 4}} {
		clock := testclock.New(bucketStart)
		l := b.limiter(t, WithClock(clock.Now))
		s := scope(t, strconv.FormatBool(tc.upstream))
		lim := TokenBucket(10, 10, 10*time.Second) // a unit a second
		lim.AsUpstream = tc.upstream
		// 6 at 0 (4 left), 8 at +4s (none left), then the first settled to
		// 0: the upstream's bucket, refilled to 8 by +4s and drawn to 0,
		// takes its 6 back: 4 out. The conservative refund gives back 6
		// less the 4 refilled since: 8 out.
		a := mustAllow(t, l, s, charge("b", 6, lim))
		clock.Add(4 * time.Second)
		if r := mustAllow(t, l, s, charge("b", 8, lim)); !r.OK() {
			t.Fatal("8 units refused with 8 in the bucket")
		}
		if err := a.Settle(ctx, "b", 0); err != nil {
			t.Fatal(err)
		}
		if u := mustUsage(t, l, s, "b", lim); u.Used != tc.used {
			t.Errorf("AsUpstream %v: after the refund of 6: used %d, want %d", tc.upstream, u.Used, tc.used)
		}
		if !tc.upstream {
			continue
		}
		// A full bucket takes nothing more back: a refund is up to full.
		clock.Add(time.Minute)
		c := mustAllow(t, l, s, charge("b", 3, lim))
		d := mustAllow(t, l, s, charge("b", 7, lim))
		if !c.OK() || !d.OK() {
			t.Fatal("a full bucket refused its capacity")
		}
		clock.Add(3 * time.Second)
		if err := c.Settle(ctx, "b", 0); err != nil { // 3 back: 7 - 3 + 0 out
			t.Fatal(err)
		}
		if err := d.Settle(ctx, "b", 0); err != nil { // 7 back: none out, not below
			t.Fatal(err)
		}
		if u := mustUsage(t, l, s, "b", lim); u.Used != 0 {
			t.Errorf("after refunds past full: used %d, want 0", u.Used)
		}
		if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
			t.Error("a full bucket refused its capacity after the refunds")
		}
		if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() {
			t.Error("refunds past full let the bucket hold more than its capacity")
		}
		// A refund while a hold waits: the upstream takes the refund
		// first, up to full, and the held units when they arrive. 10 at
		// +0, a hold of 5 dated +5s, the 10 refunded at +1s: the
		// upstream's bucket is full (10) from +1s, holds 5 after the hold
		// at +5s. Giving the 10 back from the debt with the hold in it
		// would leave it full after the hold.
		clock.Add(time.Minute)
		first := mustAllow(t, l, s, charge("b", 10, lim))
		held, err := l.Reserve(ctx, s, time.Minute, charge("b", 5, lim))
		if err != nil || !held.OK() || held.Delay() != 5*time.Second {
			t.Fatalf("a hold of 5 on an empty bucket: %v, OK %v, delay %v, want 5s", err, held.OK(), held.Delay())
		}
		clock.Add(time.Second)
		if err := first.Settle(ctx, "b", 0); err != nil {
			t.Fatal(err)
		}
		clock.Add(4 * time.Second) // the hold's instant
		if r := mustAllow(t, l, s, charge("b", 6, lim)); r.OK() {
			t.Error("6 units admitted after the hold, where the upstream's bucket holds 5")
		}
		if r := mustAllow(t, l, s, charge("b", 5, lim)); !r.OK() {
			t.Error("5 units refused after the hold, where the upstream's bucket holds 5")
		}
		// A hold given up before its instant comes back; a call that
		// never reached the upstream, cancelled after its instant, does
		// not: the upstream gives nothing back for what it never counted.
		clock.Add(time.Minute)
		mustAllow(t, l, s, charge("b", 10, lim))
		hold, err := l.Reserve(ctx, s, time.Minute, charge("b", 5, lim))
		if err != nil || !hold.OK() || hold.Delay() != 5*time.Second {
			t.Fatalf("a hold of 5 on an empty bucket: %v, OK %v, delay %v, want 5s", err, hold.OK(), hold.Delay())
		}
		if err := hold.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if u := mustUsage(t, l, s, "b", lim); u.Used != 10 {
			t.Errorf("after a hold given up: used %d, want 10", u.Used)
		}
		clock.Add(10 * time.Second)
		never := mustAllow(t, l, s, charge("b", 4, lim))
		clock.Add(time.Second)
		if err := never.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if u := mustUsage(t, l, s, "b", lim); u.Used != 3 {
			t.Errorf("after a call cancelled past its instant: used %d, want 3 (its 4 less a second's refill)", u.Used)
		}
	}
}

// testAsUpstreamProperty: random calls, holds, refunds, extra charges and
// cancels against the model of the upstream's bucket. Decided at once
// (no hold), the engine keeps exactly the upstream's bucket: the same
// decision on every call and the same units out after every step, so a
// refund gives back what the upstream gives back, no more, no less. With
// holds, the upstream refuses nothing it is sent, and the engine never
// counts fewer units out than the upstream.
func testAsUpstreamProperty(t *testing.T, b *backend) {
	ctx := context.Background()
	shapes := []struct{ c, r int64 }{{10, 10}, {7, 3}, {100, 1000}, {1, 1}, {60, 7}, {300, 300}}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 43))
		shape := shapes[seed%uint64(len(shapes))]
		period := time.Duration(1+rng.IntN(5)) * time.Second
		c, r, p := shape.c, shape.r, period.Microseconds()
		lim := TokenBucket(c, r, period)
		lim.AsUpstream = true
		for _, holds := range []bool{false, true} {
			clock := testclock.New(bucketStart)
			l := b.limiter(t, WithClock(clock.Now))
			s := scope(t, strconv.FormatUint(seed, 10)+"/"+strconv.FormatBool(holds))
			m := &upstreamBucket{c: c, r: r, p: p, level: c * p, at: bucketStart.UnixMicro()}
			type call struct {
				res     *Reservation
				id      int64
				at      int64
				charged int64
			}
			var live []call
			for step := range 250 {
				clock.Add(time.Duration(rng.Int64N(2*p/c+1)) * time.Microsecond)
				now := clock.Now().UnixMicro()
				m.arrive(now)
				n := 1 + rng.Int64N(c)
				what := "a call"
				switch op := rng.IntN(10); {
				case op < 4 || len(live) == 0:
					wait := time.Duration(0)
					if holds {
						wait = time.Duration(rng.Int64N(3*p)) * time.Microsecond
					}
					res, err := l.Reserve(ctx, s, wait, charge("b", n, lim))
					if err != nil {
						t.Fatal(err)
					}
					if !holds {
						m.advance(now)
						if want := m.level >= n*p; res.OK() != want {
							t.Fatalf("seed %d step %d: %d units admitted %v, the upstream's bucket (%d/%d) says %v", seed, step, n, res.OK(), m.level, p, want)
						}
					}
					if res.OK() {
						at := res.Time().UnixMicro()
						m.pending = append(m.pending, pendingCall{int64(step), at, n})
						m.arrive(now)
						live = append(live, call{res, int64(step), at, n})
					}
				case op < 7:
					// The answer ended: settled to fewer, or (one in four,
					// no hold waiting) more, units than charged; the
					// upstream corrected it first. An extra charge cannot
					// move the holds already dated: the upstream may
					// refuse them, whoever refunds how.
					k := rng.IntN(len(live))
					x := live[k]
					if x.at > now {
						continue // not sent yet
					}
					to := rng.Int64N(x.charged + 1)
					if !holds && rng.IntN(4) == 0 {
						to = x.charged + rng.Int64N(c)
					}
					what = "a settlement of " + strconv.FormatInt(x.charged, 10) + " to " + strconv.FormatInt(to, 10)
					m.giveBack(now, x.charged-to)
					if err := x.res.Settle(ctx, "b", to); err != nil {
						t.Fatal(err)
					}
					live[k].charged = to
				case op < 8:
					k := rng.IntN(len(live))
					x := live[k]
					what = "a cancel"
					if x.at > now {
						m.drop(x.id) // a hold given up: never sent
					} // else a call that never reached the upstream: it counted nothing there
					if err := x.res.Cancel(ctx); err != nil {
						t.Fatal(err)
					}
					live = append(live[:k], live[k+1:]...)
				default:
					continue
				}
				if m.refused > 0 {
					t.Fatalf("seed %d step %d, after %s: the upstream would have refused a call tollgate admitted", seed, step, what)
				}
				got, want := debtAt(t, b, l, s, lim, now), m.debt(now)
				if !holds && got != want {
					t.Fatalf("seed %d step %d, after %s: a debt of %d (units × µs), the upstream's bucket %d", seed, step, what, got, want)
				}
				if got < want {
					t.Fatalf("seed %d step %d, after %s: a debt of %d (units × µs), less than the upstream's %d", seed, step, what, got, want)
				}
				if !holds {
					if got, want := mustUsage(t, l, s, "b", lim).Used, m.used(now); got != want {
						t.Fatalf("seed %d step %d, after %s: Usage tells %d units out, the upstream's bucket %d", seed, step, what, got, want)
					}
				}
			}
			// The holds still waiting reach the upstream, which refuses none.
			clock.Add(time.Duration(4*c*p/r) * time.Microsecond)
			m.arrive(clock.Now().UnixMicro())
			if m.refused > 0 {
				t.Fatalf("seed %d: the upstream would have refused %d held calls when they arrived", seed, m.refused)
			}
		}
	}
}

// testAsUpstreamFastAgrees: settlefast.lua and the general code
// (bucketlog.lua's change()) settle a bucket that refunds as its upstream
// to the same state, byte for byte, holds waiting or not.
func testAsUpstreamFastAgrees(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC))
	l := b.limiter(t, WithClock(clock.Now))
	scopes := [2]string{scope(t, "fast"), scope(t, "general")}
	scripts := [2]*redis.Script{settleScript, generalSettle}
	otpm := TokenBucket(1500, 1500, time.Minute)
	otpm.AsUpstream = true
	rng := rand.New(rand.NewPCG(43, 8))
	var held [][2]*Reservation
	for step := range 300 {
		clock.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		if rng.IntN(3) > 0 || len(held) == 0 {
			out := int64(1 + rng.IntN(600))
			wait := time.Duration(rng.IntN(2)) * 20 * time.Second
			var pair [2]*Reservation
			for k, s := range scopes {
				r, err := l.Reserve(ctx, s, wait, charge("output", out, otpm))
				if err != nil {
					t.Fatal(err)
				}
				pair[k] = r
			}
			if pair[0].OK() != pair[1].OK() || pair[0].Time() != pair[1].Time() {
				t.Fatalf("step %d: decisions differ", step)
			}
			if pair[0].OK() {
				held = append(held, pair)
			}
			continue
		}
		pair := held[rng.IntN(len(held))]
		units := map[string]int64{"output": int64(rng.IntN(900))}
		for k := range scopes {
			if err := pair[k].settle(ctx, scripts[k], units); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		var states [2]string
		for k, s := range scopes {
			v, err := b.client.Get(ctx, l.window(s, "output", otpm).meta).Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			states[k] = v
		}
		if states[0] != states[1] {
			t.Fatalf("step %d: state %x settled by settlefast.lua, want %x as by the general code", step, states[0], states[1])
		}
	}
}

// TestAsUpstreamOnlyBuckets: AsUpstream is a token bucket's; a lease is
// not taken on one.
func TestAsUpstreamOnlyBuckets(t *testing.T) {
	w := PerWindow(10, time.Minute)
	w.AsUpstream = true
	if err := w.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a window that refunds as its upstream: %v, want ErrInvalid", err)
	}
	lim := TokenBucket(10, 10, time.Minute)
	lim.AsUpstream = true
	if err := lim.Validate(); err != nil {
		t.Errorf("a token bucket that refunds as its upstream: %v", err)
	}
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lease(context.Background(), "s", charge("b", 5, lim), time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("a lease on it: %v, want ErrInvalid", err)
	}
}
