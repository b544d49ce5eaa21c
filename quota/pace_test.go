package quota

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// paceModel is an independent model of a paced window: what each window
// holds, and the instants its calls were admitted at.
type paceModel struct {
	units, burst int64                      // U and B
	bounds       func(t int64) (s, e int64) // the window holding t
	calls        []modelCall
}

type modelCall struct {
	at, units int64
	gone      bool
}

// allowance is what the window [s, e) may hold at t: B + floor(P·(t-s)/len),
// in exact integers.
func (m *paceModel) allowance(s, e, t int64) int64 {
	p := big.NewInt(m.units - m.burst)
	p.Mul(p, big.NewInt(t-s))
	p.Quo(p, big.NewInt(e-s))
	return m.burst + p.Int64()
}

// counted returns the units of the window [s, e).
func (m *paceModel) counted(s, e int64) int64 {
	var n int64
	for _, c := range m.calls {
		if !c.gone && c.at >= s && c.at < e {
			n += c.units
		}
	}
	return n
}

// at returns the earliest instant from now a call of units fits, the
// windows after now's included.
func (m *paceModel) at(now, units int64) int64 {
	t := now
	for range 3 {
		s, e := m.bounds(t)
		need := m.counted(s, e) + units
		if need <= m.units {
			// The least d with B + floor(P·d/len) >= need.
			d := int64(0)
			if need > m.burst {
				q, r := new(big.Int).QuoRem(
					new(big.Int).Mul(big.NewInt(need-m.burst), big.NewInt(e-s)),
					big.NewInt(m.units-m.burst), new(big.Int))
				d = q.Int64()
				if r.Sign() > 0 {
					d++
				}
			}
			if s+d < e {
				return max(t, s+d)
			}
		}
		t = e
	}
	return -1
}

// check fails the test when a window ever held more than its pace line
// allows, at the instant of any of its calls.
func (m *paceModel) check(t *testing.T) {
	t.Helper()
	for _, c := range m.calls {
		if c.gone {
			continue
		}
		s, e := m.bounds(c.at)
		var upTo int64
		for _, o := range m.calls {
			if !o.gone && o.at >= s && o.at <= c.at {
				upTo += o.units
			}
		}
		if a := m.allowance(s, e, c.at); upTo > a {
			t.Fatalf("at %d the window from %d holds %d units, over its pace line %d", c.at, s, upTo, a)
		}
	}
}

// testPaceModel runs random calls, holds and cancellations on paced
// calendar days and fixed windows against the model: every decision's
// answer and instant is the model's, and no window ever runs ahead of its
// pace line.
func testPaceModel(t *testing.T, b *backend) {
	ctx := context.Background()
	day0 := time.Date(2026, 3, 7, 0, 0, 0, 0, mustLoad(t, "America/Los_Angeles")) // a 23-hour day follows
	ends := time.Date(2026, 3, 7, 1, 0, 0, 0, time.UTC)
	for _, kind := range []struct {
		name   string
		limit  Limit
		start  time.Time
		wait   time.Duration // the most a hold may wait
		bounds func(t int64) (int64, int64)
	}{
		{"day", PerDay(1000, day0.Location()), day0.Add(20 * time.Hour), 4 * time.Hour, func(t int64) (int64, int64) {
			d := time.UnixMicro(t).In(day0.Location())
			y, mo, dd := d.Date()
			return time.Date(y, mo, dd, 0, 0, 0, 0, d.Location()).UnixMicro(), time.Date(y, mo, dd+1, 0, 0, 0, 0, d.Location()).UnixMicro()
		}},
		{"fixed", PerFixedWindow(1000, time.Hour, ends), ends.Add(-50 * time.Minute), 10 * time.Minute, func(t int64) (int64, int64) {
			w := time.Hour.Microseconds()
			k := (t - ends.UnixMicro()) / w
			if t < ends.UnixMicro()+k*w {
				k--
			}
			s := ends.UnixMicro() + k*w
			return s, s + w
		}},
	} {
		for _, burst := range []float64{0, 0.1, 0.5} {
			t.Run(fmt.Sprintf("%s/burst=%v", kind.name, burst), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(burst*10)+1, 41))
				clock := testclock.New(kind.start)
				l := b.limiter(t, WithClock(clock.Now))
				s := scope(t, kind.name)
				pace := &Pace{Burst: burst}
				m := &paceModel{units: 1000, burst: pace.burstUnits(1000), bounds: kind.bounds}
				var held []*Reservation
				var which []int
				var refused, later int
				for i := range 400 {
					clock.Add(time.Duration(rng.Int64N(int64(40 * time.Second))))
					now := clock.Now().UnixMicro()
					units := 1 + rng.Int64N(40)
					c := Demand{Bucket: "b", Units: units, Limits: []Limit{kind.limit}, Pace: pace}
					want := m.at(now, units)
					switch op := rng.IntN(10); {
					case op < 6:
						r, err := l.Allow(ctx, s, c)
						if err != nil {
							t.Fatal(err)
						}
						if got := r.Time().UnixMicro(); r.OK() != (want == now) || (!r.OK() && got != want) {
							t.Fatalf("call %d: %d units at %d: OK %v at %d, want at %d", i, units, now, r.OK(), got, want)
						}
						if !r.OK() {
							refused++
						}
						if r.OK() {
							m.calls = append(m.calls, modelCall{at: now, units: units})
							held, which = append(held, r), append(which, len(m.calls)-1)
						}
					case op < 8:
						r, err := l.Reserve(ctx, s, kind.wait, c)
						if err != nil {
							t.Fatal(err)
						}
						ok := want >= 0 && want-now <= kind.wait.Microseconds()
						if got := r.Time().UnixMicro(); r.OK() != ok || (want >= 0 && got != want) {
							t.Fatalf("hold %d: %d units at %d: OK %v at %d, want at %d (OK %v)", i, units, now, r.OK(), got, want, ok)
						}
						if r.OK() && want > now {
							later++
						}
						if r.OK() {
							m.calls = append(m.calls, modelCall{at: want, units: units})
							held, which = append(held, r), append(which, len(m.calls)-1)
							clock.Set(r.Time()) // the next call comes after the hold
						}
					default:
						if len(held) == 0 {
							continue
						}
						k := rng.IntN(len(held))
						if err := held[k].Cancel(ctx); err != nil {
							t.Fatal(err)
						}
						m.calls[which[k]].gone = true
						held, which = append(held[:k], held[k+1:]...), append(which[:k], which[k+1:]...)
					}
					m.check(t)
				}
				if refused < 20 || later < 10 {
					t.Errorf("%d refusals and %d holds dated later: the pace line was not reached often enough to test it", refused, later)
				}
			})
		}
	}
}

// testMuldivExact: fair.lua's muldiv, on which the pace line rests, is
// exact where a·b lies far beyond the 2^53 that doubles hold: a limit of
// up to MaxUnits over windows of up to days in µs.
func testMuldivExact(t *testing.T, b *backend) {
	ctx := context.Background()
	script := newScript(binaryPart + logParts + fairPart +
		"local q, r = muldiv(tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))\n" +
		"return {string.format('%d', q), string.format('%d', r)}")
	rng := rand.New(rand.NewPCG(5, 3))
	day := (25 * time.Hour).Microseconds()
	for i := range 300 {
		c := 1 + rng.Int64N(MaxUnits)
		a := rng.Int64N(c + 1)
		bb := rng.Int64N(day)
		if i%3 == 0 { // a pace line: P·d / len
			c = 1 + rng.Int64N(day)
			a = rng.Int64N(MaxUnits)
			bb = rng.Int64N(c)
		}
		got, err := script.Run(ctx, b.client, []string{"k"}, a, bb, c).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(a), big.NewInt(bb)), big.NewInt(c), new(big.Int))
		if got[0] != q.String() || got[1] != r.String() {
			t.Fatalf("muldiv(%d, %d, %d) = %v, want %v %v", a, bb, c, got, q, r)
		}
	}
}

// testPaceBesideTokenBucket: a paced charge whose limits are a token
// bucket and a day paces the day and decides the bucket as ever, in one
// decision.
func testPaceBesideTokenBucket(t *testing.T, b *backend) {
	clock := testclock.New(time.Date(2026, 6, 3, 1, 0, 0, 0, time.UTC))
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	c := Demand{Bucket: "b", Units: 1, Limits: []Limit{TokenBucket(3, 3, time.Minute), PerDay(96, time.UTC)}, Pace: &Pace{}}
	// At 01:00 the day's line is at 96/24 = 4; the bucket holds 3.
	for i := range 3 {
		if r := mustAllow(t, l, s, c); !r.OK() {
			t.Fatalf("call %d refused, retry after %v", i, r.RetryAfter())
		}
	}
	if r := mustAllow(t, l, s, c); r.OK() || r.RetryAfter() != 20*time.Second {
		t.Fatalf("the bucket spent: OK %v, retry after %v; want its refill of one unit, 20s", r.OK(), r.RetryAfter())
	}
	clock.Add(time.Minute) // the bucket full again; the line at 4
	if r := mustAllow(t, l, s, c); !r.OK() {
		t.Fatalf("the fourth unit refused, retry after %v", r.RetryAfter())
	}
	if r := mustAllow(t, l, s, c); r.OK() || r.RetryAfter() != 14*time.Minute {
		t.Fatalf("past the line: OK %v, retry after %v; want the line's next unit at 01:15, 14m", r.OK(), r.RetryAfter())
	}
	// With shares too: settled and cancelled, the day's tenant gets its
	// units back, the bucket is left to its own rules.
	c.Pace, c.Shares, c.Tenant, c.Bucket = nil, &Shares{}, "eu", "shared"
	r := mustAllow(t, l, s, c)
	if !r.OK() {
		t.Fatal("a call with shares refused")
	}
	ctx := context.Background()
	if err := r.Settle(ctx, "shared", 2); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	w := l.window(s, "shared", c.Limits[1])
	if v, err := b.client.Get(ctx, tenantsKey(w.meta)).Result(); err != nil || strings.Contains(v, ";") {
		t.Errorf("the tenants after Settle and Cancel: %q, %v; want eu with nothing spent", v, err)
	}
}
