package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/testclock"
)

// sharesModel is an independent model of a window with shares (and
// perhaps a pace), in exact rationals: what each window and each tenant
// in it holds, and when each tenant last asked.
type sharesModel struct {
	pace    *paceModel // its windows, its allowance; burst = units without a pace
	paced   bool
	shares  *Shares
	counted map[int64]int64            // window start: units
	spent   map[int64]map[string]int64 // window start: tenant: units
	seen    map[string]int64
}

// margin returns A(t) less what tenant's call of need units at t asks
// for, given what the others keep: it fits when the margin is at least 0.
func (m *sharesModel) margin(tenant string, need, t, now int64) *big.Rat {
	s, e := m.pace.bounds(t)
	a := m.pace.units
	if m.paced {
		a = m.pace.allowance(s, e, t)
	}
	A := new(big.Rat).SetInt64(a)
	counted := m.counted[s]
	if counted+need > a {
		return new(big.Rat).SetInt64(a - counted - need)
	}
	names, W := m.tenants(tenant, now)
	active := func(name string) bool { return m.active(tenant, name, now) }
	unspent := func(name string) *big.Rat {
		u := new(big.Rat).Mul(A, new(big.Rat).SetFloat64(m.weight(name)))
		u.Quo(u, W)
		u.Sub(u, new(big.Rat).SetInt64(m.spent[s][name]))
		if u.Sign() < 0 {
			u.SetInt64(0)
		}
		return u
	}
	lhs := new(big.Rat).SetInt64(counted)
	for _, name := range names {
		if name == tenant {
			continue
		}
		u := unspent(name)
		if !active(name) {
			u.Mul(u, new(big.Rat).SetFloat64(1-m.shares.Lendable))
		}
		lhs.Add(lhs, u)
	}
	mine := unspent(tenant)
	if n := new(big.Rat).SetInt64(need); n.Cmp(mine) > 0 {
		mine = n
	}
	lhs.Add(lhs, mine)
	return new(big.Rat).Sub(A, lhs)
}

// weight returns a tenant's weight.
func (m *sharesModel) weight(name string) float64 {
	if w, ok := m.shares.Weights[name]; ok {
		return w
	}
	return 1
}

// active reports whether name is active at now when tenant asks.
func (m *sharesModel) active(tenant, name string, now int64) bool {
	seen, ok := m.seen[name]
	return name == tenant || ok && seen > now-m.shares.idle().Microseconds()
}

// tenants returns the tenants that share a window when tenant asks at
// now (the listed ones and the active others), and W, their weights' sum.
func (m *sharesModel) tenants(tenant string, now int64) ([]string, *big.Rat) {
	var names []string
	for name := range m.shares.Weights {
		names = append(names, name)
	}
	for name := range m.seen {
		if _, ok := m.shares.Weights[name]; !ok && m.active(tenant, name, now) {
			names = append(names, name)
		}
	}
	if _, ok := m.shares.Weights[tenant]; !ok && !slices.Contains(names, tenant) {
		names = append(names, tenant)
	}
	W := new(big.Rat)
	for _, name := range names {
		W.Add(W, new(big.Rat).SetFloat64(m.weight(name)))
	}
	return names, W
}

// below reports whether tenant has spent less than its share at now of
// the window holding now (it may then hold; else it waits in the room),
// and whether the answer is too close to call for doubles.
func (m *sharesModel) below(tenant string, now int64) (ok, close bool) {
	s, e := m.pace.bounds(now)
	a := m.pace.units
	if m.paced {
		a = m.pace.allowance(s, e, now)
	}
	_, W := m.tenants(tenant, now)
	share := new(big.Rat).Mul(new(big.Rat).SetInt64(a), new(big.Rat).SetFloat64(m.weight(tenant)))
	share.Quo(share, W)
	d, _ := new(big.Rat).Sub(share, new(big.Rat).SetInt64(m.spent[s][tenant])).Float64()
	return d > 0, d > -1e-6 && d < 1e-6
}

// fits reports whether the call fits at t, and whether the answer is too
// close to call for doubles.
func (m *sharesModel) fits(tenant string, need, t, now int64) (ok, close bool) {
	g := m.margin(tenant, need, t, now)
	f, _ := g.Float64()
	return g.Sign() >= 0, f > -1e-6 && f < 1e-6
}

// at returns the earliest instant from now the call fits (-1: none in
// the windows sent), and whether some instant's answer was too close to
// call.
func (m *sharesModel) at(tenant string, need, now int64) (int64, bool) {
	t, close := now, false
	for range 3 {
		s, e := m.pace.bounds(t)
		ok, c := m.fits(tenant, need, e-1, now)
		close = close || c
		if ok {
			lo, hi := t, e-1
			for lo < hi {
				mid := lo + (hi-lo)/2
				ok, c := m.fits(tenant, need, mid, now)
				close = close || c
				if ok {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			return lo, close
		}
		_ = s
		t = e
	}
	return -1, close
}

// add counts units of tenant in the window holding at.
func (m *sharesModel) add(tenant string, at, units int64) {
	s, _ := m.pace.bounds(at)
	if m.spent[s] == nil {
		m.spent[s] = map[string]int64{}
	}
	m.counted[s] = max(m.counted[s]+units, 0)
	m.spent[s][tenant] = max(m.spent[s][tenant]+units, 0)
}

// testSharesModel runs random tenants, weights, costs, instants, holds,
// cancellations and settlements on a calendar day with shares, with and
// without a pace, against the model: every answer and instant is the
// model's (but for answers within 1e-6 of a unit, which doubles may call
// either way), no window ever holds more than its limit, and a tenant
// below its share is admitted whenever its call fits in its unspent
// share.
func testSharesModel(t *testing.T, b *backend) {
	ctx := context.Background()
	loc := time.UTC
	start := time.Date(2026, 5, 1, 18, 0, 0, 0, loc)
	bounds := func(t int64) (int64, int64) {
		y, mo, d := time.UnixMicro(t).In(loc).Date()
		return time.Date(y, mo, d, 0, 0, 0, 0, loc).UnixMicro(), time.Date(y, mo, d+1, 0, 0, 0, 0, loc).UnixMicro()
	}
	limit := PerDay(1000, loc)
	for _, tc := range []struct {
		shares Shares
		pace   *Pace
		others []string // tenants not listed
	}{
		{Shares{Weights: map[string]float64{"a": 1, "b": 1, "c": 2, "d": 4}, Idle: 10 * time.Minute}, nil, nil},
		{Shares{Weights: map[string]float64{"a": 1, "b": 3, "c": 2}, Lendable: 0.5, Idle: 10 * time.Minute}, nil, []string{"x", "y"}},
		{Shares{Weights: map[string]float64{"a": 1, "b": 1, "c": 2}, Lendable: 1, Idle: 5 * time.Minute}, nil, []string{"x"}},
		{Shares{Weights: map[string]float64{"a": 1, "b": 1, "c": 2, "d": 4}, Idle: 10 * time.Minute}, &Pace{Burst: 0.2}, nil},
		{Shares{Weights: map[string]float64{"a": 2, "b": 1}, Lendable: 0.5, Idle: 10 * time.Minute}, &Pace{Burst: 0}, []string{"x"}},
	} {
		name := fmt.Sprintf("lendable=%v/pace=%v/unlisted=%d", tc.shares.Lendable, tc.pace != nil, len(tc.others))
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(tc.shares.Weights)), uint64(len(tc.others))+7))
			clock := testclock.New(start)
			l := b.limiter(t, WithClock(clock.Now))
			s := scope(t, "s")
			m := &sharesModel{
				pace:    &paceModel{units: 1000, bounds: bounds},
				paced:   tc.pace != nil,
				shares:  &tc.shares,
				counted: map[int64]int64{}, spent: map[int64]map[string]int64{}, seen: map[string]int64{},
			}
			if tc.pace != nil {
				m.pace.burst = tc.pace.burstUnits(1000)
			}
			var tenants []string
			for name := range tc.shares.Weights {
				tenants = append(tenants, name)
			}
			slices.Sort(tenants)
			tenants = append(tenants, tc.others...)
			type made struct {
				r      *Reservation
				tenant string
				at     int64
				units  int64
			}
			var rs []made
			var admitted, refused, closeCalls int
			for i := range 600 {
				// Some tenants ask often, some rarely: a rare one goes idle.
				tenant := tenants[min(rng.IntN(len(tenants)+3), len(tenants)-1)]
				if rng.IntN(3) == 0 {
					tenant = tenants[rng.IntN(len(tenants))]
				}
				clock.Add(time.Duration(rng.Int64N(int64(3 * time.Minute))))
				now := clock.Now().UnixMicro()
				units := 1 + rng.Int64N(60)
				c := Demand{Bucket: "b", Units: units, Limits: []Limit{limit}, Pace: tc.pace, Shares: &tc.shares, Tenant: tenant}
				op := rng.IntN(20)
				switch {
				case op < 14:
					wait := time.Duration(0)
					if op >= 11 {
						wait = 2 * time.Hour
					}
					want, close := m.at(tenant, units, now)
					ok := want >= 0 && want-now <= wait.Microseconds()
					// A tenant at or above its share never holds: it is
					// admitted now, or waits its turn in the room, which
					// this test (one goroutine, its clock standing still)
					// leaves once the context ends.
					below, near := m.below(tenant, now)
					close = close || near
					rctx, cancel := ctx, context.CancelFunc(func() {})
					if !below && wait > 0 {
						ok = want == now
						if !ok {
							rctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
						}
					}
					// The guarantee, stated on its own: below its share, a
					// call that fits in its unspent share is admitted.
					sd, _ := bounds(now)
					guaranteed := !m.paced && tc.shares.Lendable == 0 && len(tc.others) == 0 &&
						float64(m.spent[sd][tenant]+units) <= 1000*tc.shares.Weights[tenant]/8
					r, err := l.Reserve(rctx, s, wait, c)
					cancel()
					if err != nil {
						t.Fatal(err)
					}
					got := r.Time().UnixMicro()
					if guaranteed && !r.OK() {
						t.Fatalf("call %d: %s below its share (spent %d of %v) refused %d units", i, tenant, m.spent[sd][tenant], 1000*tc.shares.Weights[tenant]/8, units)
					}
					if r.OK() != ok || (want >= 0 && got != want) {
						if !close {
							t.Fatalf("call %d: %s asks %d units at %d (wait %v): OK %v at %d, want OK %v at %d", i, tenant, units, now, wait, r.OK(), got, ok, want)
						}
						closeCalls++
					}
					m.seen[tenant] = now
					if !r.OK() {
						refused++
						continue
					}
					admitted++
					m.add(tenant, got, units)
					rs = append(rs, made{r, tenant, got, units})
					if got > now {
						clock.Set(r.Time()) // the next call comes after the hold
					}
				case op < 17 && len(rs) > 0:
					k := rng.IntN(len(rs))
					if err := rs[k].r.Cancel(ctx); err != nil {
						t.Fatal(err)
					}
					m.add(rs[k].tenant, rs[k].at, -rs[k].units)
					rs = slices.Delete(rs, k, k+1)
				case len(rs) > 0:
					k := rng.IntN(len(rs))
					units := rng.Int64N(rs[k].units + 1)
					if err := rs[k].r.Settle(ctx, "b", units); err != nil {
						t.Fatal(err)
					}
					m.add(rs[k].tenant, rs[k].at, units-rs[k].units)
					rs[k].units = units
				}
				for ws, n := range m.counted {
					if n > 1000 {
						t.Fatalf("call %d: the window from %d holds %d units, over its limit", i, ws, n)
					}
				}
			}
			if refused < 30 || admitted < 100 || closeCalls > 5 {
				t.Errorf("%d admitted, %d refused, %d too close to call: not the mix the test needs", admitted, refused, closeCalls)
			}
		})
	}
}

// testPlainRunsLean: a charge with neither a pace nor shares is decided by
// the reserve script's lean form, as before, and never loads the fair
// scripts; a paced one loads the fair script and writes no tenants; one
// with shares writes its tenants beside its window.
func testPlainRunsLean(t *testing.T, b *backend) {
	if !b.real {
		t.Skip("miniredis keeps no script cache to look into")
	}
	ctx := context.Background()
	b.flushScripts(t)
	l := b.limiter(t)
	s := scope(t, "s")
	day := PerDay(100, time.UTC)
	loaded := func(sc interface{ Hash() string }) bool {
		t.Helper()
		var c redis.Cmdable = b.client
		if cc, ok := b.client.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, l.window(s, "plain", day).meta)
			if err != nil {
				t.Fatal(err)
			}
			c = node
		}
		got, err := c.ScriptExists(ctx, sc.Hash()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	for range 3 {
		if r := mustAllow(t, l, s, charge("plain", 1, day, PerWindow(10, time.Minute))); !r.OK() {
			t.Fatal("a plain call refused")
		}
	}
	if !loaded(lean[reserveScript]) || loaded(reserveScript) || loaded(fairScript) {
		t.Fatalf("after plain calls: lean reserve loaded %v, full %v, fair %v; want the lean form alone",
			loaded(lean[reserveScript]), loaded(reserveScript), loaded(fairScript))
	}
	if r := mustAllow(t, l, s, Demand{Bucket: "paced", Units: 1, Limits: []Limit{day}, Pace: &Pace{Burst: 0.5}}); !r.OK() {
		t.Fatal("a paced call refused")
	}
	if !loaded(fairScript) {
		t.Fatal("a paced call did not run the fair script")
	}
	w := l.window(s, "paced", day)
	if n, err := b.client.Exists(ctx, tenantsKey(w.meta)).Result(); err != nil || n != 0 {
		t.Fatalf("a paced call without shares wrote tenants (%d, %v)", n, err)
	}
	shared := Demand{Bucket: "shared", Units: 1, Limits: []Limit{day}, Shares: &Shares{}, Tenant: "eu"}
	if r := mustAllow(t, l, s, shared); !r.OK() {
		t.Fatal("a call with shares refused")
	}
	w = l.window(s, "shared", day)
	if v, err := b.client.Get(ctx, tenantsKey(w.meta)).Result(); err != nil || !strings.HasPrefix(v, "T1\n2:eu") || !strings.HasSuffix(v, ":1") {
		t.Fatalf("the tenant's record: %q, %v; want its unit counted", v, err)
	}
	if ttl, err := b.client.PTTL(ctx, tenantsKey(w.meta)).Result(); err != nil || ttl <= 0 {
		t.Fatalf("the tenants key's TTL: %v, %v", ttl, err)
	}
}

// testSharesLend: with three of eight listed tenants active, what the idle
// five lend goes to the three: together they spend at least 90% of the
// day, and Lendable 0 keeps the idle five's shares for them.
func testSharesLend(t *testing.T, b *backend) {
	ctx := context.Background()
	weights := map[string]float64{}
	for i := range 8 {
		weights[fmt.Sprintf("t%d", i)] = 1
	}
	for _, c := range []struct {
		lendable float64
		min, max int64 // what the three spend together
	}{
		{1, 1000, 1000},
		{0.9, 900, 1000},
		{0.5, 600, 700},
		{0, 375, 375},
	} {
		t.Run(fmt.Sprintf("lendable=%v", c.lendable), func(t *testing.T) {
			clock := testclock.New(time.Date(2026, 9, 1, 6, 0, 0, 0, time.UTC))
			l := b.limiter(t, WithClock(clock.Now))
			s := scope(t, "s")
			shares := &Shares{Weights: weights, Lendable: c.lendable, Idle: time.Minute}
			var spent int64
			for range 500 {
				clock.Add(time.Second)
				for i := range 3 {
					ch := Demand{Bucket: "b", Units: 1, Limits: []Limit{PerDay(1000, time.UTC)}, Shares: shares, Tenant: fmt.Sprintf("t%d", i)}
					r, err := l.Allow(ctx, s, ch)
					if err != nil {
						t.Fatal(err)
					}
					if r.OK() {
						spent++
					}
				}
			}
			if spent < c.min || spent > c.max {
				t.Errorf("the three active spent %d of 1000, want %d to %d", spent, c.min, c.max)
			}
		})
	}
}

// TestFairChargesInvalid: a pace or shares that cannot be used is refused
// with ErrInvalid before Redis is asked.
func TestFairChargesInvalid(t *testing.T) {
	l := mustNew(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	day := []Limit{PerDay(100, time.UTC)}
	shares := &Shares{}
	for _, c := range []struct {
		name    string
		charges []Demand
	}{
		{"burst over 1", []Demand{{Bucket: "b", Units: 1, Limits: day, Pace: &Pace{Burst: 1.5}}}},
		{"burst NaN", []Demand{{Bucket: "b", Units: 1, Limits: day, Pace: &Pace{Burst: math.NaN()}}}},
		{"lendable below 0", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: &Shares{Lendable: -0.1}, Tenant: "a"}}},
		{"idle below 0", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: &Shares{Idle: -time.Second}, Tenant: "a"}}},
		{"weight 0", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: &Shares{Weights: map[string]float64{"a": 0}}, Tenant: "a"}}},
		{"weight infinite", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: &Shares{Weights: map[string]float64{"a": math.Inf(1)}}, Tenant: "a"}}},
		{"no tenant", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: shares}}},
		{"two tenants", []Demand{{Bucket: "b", Units: 1, Limits: day, Shares: shares, Tenant: "a"}, {Bucket: "c", Units: 1, Limits: day, Shares: shares, Tenant: "b"}}},
	} {
		_, err := l.Allow(context.Background(), "s", c.charges...)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
}
