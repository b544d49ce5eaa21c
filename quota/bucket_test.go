package quota

import (
	"context"
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
)

// The token bucket's suite: every test runs on miniredis, on a real
// redis-server and on a real 3-master cluster, as the windows' suite does.
var bucketSuite = []struct {
	name string
	run  func(t *testing.T, b *backend)
}{
	{"BurstThenRefill", testBucketBurstThenRefill},
	{"PropertyAgainstModel", testBucketProperty},
	{"HoldsInArrivalOrder", testBucketHoldsFIFO},
	{"CancelGivesUnitsBack", testBucketCancel},
	{"SettleRefundAndExtra", testBucketSettle},
	{"RefundNeverMakesThePastOver", testBucketRefundBound},
	{"BesideADailyWindow", testBucketBesideDay},
	{"Usage", testBucketUsage},
	{"Record", testBucketRecord},
	{"FastPathAgreesWithGeneral", testBucketFastAgrees},
	{"FastPathSameBytesAsGeneral", testBucketFastSameBytes},
	{"OtherFormatRefused", testBucketOtherFormatRefused},
	{"MixedFastAgrees", testMixedFastAgrees},
	{"KeyHasTTL", testBucketTTL},
	{"Announce", testBucketAnnounce},
	{"Lease", testBucketLease},
	{"LeaseWaitsForHold", testBucketLeaseWaitsForHold},
	{"LeaseBesideADailyWindow", testBucketLeaseBesideDay},
	{"LeaseSpentAnywhereInItsTerm", testBucketLeaseProperty},
	{"BackgroundBehindInteractive", testBucketBackground},
	{"Pause", testBucketPause},
	{"AsUpstreamGivesBackWhatTheUpstreamGivesBack", testAsUpstreamRefund},
	{"AsUpstreamPropertyAgainstTheUpstream", testAsUpstreamProperty},
	{"AsUpstreamSettleFastAgreesWithGeneral", testAsUpstreamFastAgrees},
}

func runBucketSuite(t *testing.T, b *backend) {
	for _, tc := range bucketSuite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
	}
}

func TestBucketSuiteMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	runBucketSuite(t, &backend{name: "miniredis", client: c})
}

func TestBucketSuiteRedis(t *testing.T) {
	s := redistest.Start(t)
	runBucketSuite(t, &backend{name: "redis", client: s.Client(t), real: true})
}

func TestBucketSuiteCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	runBucketSuite(t, &backend{name: "cluster", client: c.Client(t), real: true})
}

// bucketStart is the instant the bucket tests start at: after 2001, so
// that the fast paths run (see fast.lua).
var bucketStart = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// testBucketBurstThenRefill: a full bucket admits its capacity at once,
// then refills continuously, where a sliding window waits a whole window.
func testBucketBurstThenRefill(t *testing.T, b *backend) {
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second) // a unit a second
	for i := range 10 {
		if r := mustAllow(t, l, s, charge("b", 1, lim)); !r.OK() {
			t.Fatalf("call %d of the capacity refused", i+1)
		}
	}
	r := mustAllow(t, l, s, charge("b", 1, lim))
	if r.OK() || r.RetryAfter() != time.Second {
		t.Fatalf("an empty bucket: OK=%v RetryAfter=%v, want a refusal for 1s", r.OK(), r.RetryAfter())
	}
	r = mustAllow(t, l, s, charge("b", 3, lim))
	if r.OK() || r.RetryAfter() != 3*time.Second {
		t.Fatalf("3 units of an empty bucket: OK=%v RetryAfter=%v, want 3s", r.OK(), r.RetryAfter())
	}
	clock.Add(2500 * time.Millisecond) // 2.5 units back
	if r := mustAllow(t, l, s, charge("b", 2, lim)); !r.OK() || r.Remaining() != 0 {
		t.Fatalf("2 units after 2.5s: OK=%v Remaining=%d, want admitted with 0 whole units left", r.OK(), r.Remaining())
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() || r.RetryAfter() != 500*time.Millisecond {
		t.Fatalf("the half unit left: OK=%v RetryAfter=%v, want a refusal for 500ms", r.OK(), r.RetryAfter())
	}
	clock.Add(time.Hour) // full again, and no more than full
	for i := range 11 {
		r := mustAllow(t, l, s, charge("b", 1, lim))
		if r.OK() != (i < 10) {
			t.Fatalf("after an hour, call %d: OK=%v, want the capacity (10) and no more", i+1, r.OK())
		}
	}
}

// bucketModel is an independent model of a token bucket: its level, kept
// as units times µs of the period (exact), refilled at every step and
// capped at the capacity.
type bucketModel struct {
	c, r, p int64 // capacity, refill per period, period µs
	level   int64 // units × p
	at      int64 // µs
}

func (m *bucketModel) advance(t int64) {
	if t > m.at {
		m.level = min(m.level+(t-m.at)*m.r, m.c*m.p)
		m.at = t
	}
}

// allow decides n units at t as the bucket would.
func (m *bucketModel) allow(t, n int64) bool {
	m.advance(t)
	if m.level >= n*m.p {
		m.level -= n * m.p
		return true
	}
	return false
}

// admission is a call admitted, at an instant (µs), with its units.
type admission struct{ at, units int64 }

// checkBucketBound fails the test when, for some T0 <= T, the units
// admitted in [T0, T] exceed c + r·(T−T0)/p. Exact: both sides times p.
func checkBucketBound(t *testing.T, adm []admission, c, r, p int64) {
	t.Helper()
	for i := range adm {
		for j := range adm {
			t0, t1 := adm[i].at, adm[j].at
			if t1 < t0 {
				continue
			}
			var sum int64
			for _, a := range adm {
				if a.at >= t0 && a.at <= t1 {
					sum += a.units
				}
			}
			lhs := new(big.Int).Mul(big.NewInt(sum), big.NewInt(p))
			rhs := new(big.Int).Add(new(big.Int).Mul(big.NewInt(c), big.NewInt(p)), new(big.Int).Mul(big.NewInt(r), big.NewInt(t1-t0)))
			if lhs.Cmp(rhs) > 0 {
				t.Fatalf("%d units admitted in [%d, %d] µs, over %d + %d·%dµs/%dµs", sum, t0, t1, c, r, t1-t0, p)
			}
		}
	}
}

// testBucketProperty: random sequences of costs and instants. Decided at
// once (Allow), the engine agrees with an independent model of the bucket
// on every call; with holds, cancels and refunds mixed in, the units
// admitted in [T0, T] never exceed C + R·(T−T0)/period.
func testBucketProperty(t *testing.T, b *backend) {
	ctx := context.Background()
	shapes := []struct{ c, r int64 }{{10, 10}, {7, 3}, {100, 1000}, {1, 1}, {60, 7}}
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 25))
		shape := shapes[seed%uint64(len(shapes))]
		period := time.Duration(1+rng.IntN(5)) * time.Second
		c, r, p := shape.c, shape.r, period.Microseconds()
		lim := TokenBucket(c, r, period)
		clock := testclock.New(bucketStart)
		l := b.limiter(t, WithClock(clock.Now))
		s := scope(t, "allow"+strconv.FormatUint(seed, 10))
		model := &bucketModel{c: c, r: r, p: p, level: c * p, at: bucketStart.UnixMicro()}
		var adm []admission
		for i := range 120 {
			clock.Add(time.Duration(rng.Int64N(p*2/c+1)) * time.Microsecond)
			n := 1 + rng.Int64N(c)
			got := mustAllow(t, l, s, charge("b", n, lim)).OK()
			want := model.allow(clock.Now().UnixMicro(), n)
			if got != want {
				t.Fatalf("seed %d call %d (%d units of %v at +%v): admitted %v, the model says %v",
					seed, i, n, lim, clock.Now().Sub(bucketStart), got, want)
			}
			if got {
				adm = append(adm, admission{clock.Now().UnixMicro(), n})
			}
		}
		checkBucketBound(t, adm, c, r, p)

		// Holds, cancels and refunds: the bound on what stays admitted.
		s = scope(t, "mixed"+strconv.FormatUint(seed, 10))
		type live struct {
			r *Reservation
			i int // in adm
		}
		adm = adm[:0]
		var held []live
		for range 150 {
			clock.Add(time.Duration(rng.Int64N(p/c+1)) * time.Microsecond)
			n := 1 + rng.Int64N(c)
			switch op := rng.IntN(10); {
			case op < 4:
				res := mustAllow(t, l, s, charge("b", n, lim))
				if res.OK() {
					adm = append(adm, admission{res.Time().UnixMicro(), n})
					held = append(held, live{res, len(adm) - 1})
				}
			case op < 7:
				res, err := l.Reserve(ctx, s, time.Duration(rng.Int64N(3*p))*time.Microsecond, charge("b", n, lim))
				if err != nil {
					t.Fatal(err)
				}
				if res.OK() {
					adm = append(adm, admission{res.Time().UnixMicro(), n})
					held = append(held, live{res, len(adm) - 1})
				}
			case op < 8 && len(held) > 0:
				k := rng.IntN(len(held))
				if err := held[k].r.Cancel(ctx); err != nil {
					t.Fatal(err)
				}
				adm[held[k].i].units = 0
				held = append(held[:k], held[k+1:]...)
			case len(held) > 0:
				k := rng.IntN(len(held))
				a := &adm[held[k].i]
				if a.units == 0 {
					continue
				}
				to := rng.Int64N(a.units) // a refund
				if err := held[k].r.Settle(ctx, "b", to); err != nil {
					t.Fatal(err)
				}
				a.units = to
			}
		}
		checkBucketBound(t, adm, c, r, p)
	}
}

// testBucketHoldsFIFO: holds are dated in arrival order at the earliest
// instant each fits; an expensive hold is not passed by cheap ones.
func testBucketHoldsFIFO(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Fatal("a full bucket refused its capacity")
	}
	want := []struct {
		units int64
		delay time.Duration
	}{{8, 8 * time.Second}, {1, 9 * time.Second}, {1, 10 * time.Second}, {5, 15 * time.Second}}
	for i, w := range want {
		r, err := l.Reserve(ctx, s, -1, charge("b", w.units, lim))
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Delay() != w.delay {
			t.Errorf("hold %d of %d units: OK=%v Delay=%v, want %v", i, w.units, r.OK(), r.Delay(), w.delay)
		}
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() {
		t.Error("a call admitted now ahead of the holds")
	}
	// A bounded wait is refused, and counts nothing.
	if r, err := l.Reserve(ctx, s, 15*time.Second, charge("b", 1, lim)); err != nil || r.OK() || r.RetryAfter() != 16*time.Second {
		t.Errorf("a hold beyond maxWait: OK=%v RetryAfter=%v err=%v, want refused, fitting in 16s", r.OK(), r.RetryAfter(), err)
	}
	clock.Add(16 * time.Second)
	if r := mustAllow(t, l, s, charge("b", 1, lim)); !r.OK() {
		t.Error("once the holds are due, a unit refilled is refused")
	}
}

// testBucketCancel: a cancelled hold gives its units back; so does a
// call cancelled before any other was admitted after it.
func testBucketCancel(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	first := mustAllow(t, l, s, charge("b", 6, lim))
	hold, err := l.Reserve(ctx, s, -1, charge("b", 8, lim))
	if err != nil || !hold.OK() || hold.Delay() != 4*time.Second {
		t.Fatalf("hold: OK=%v Delay=%v err=%v, want 4s", hold.OK(), hold.Delay(), err)
	}
	for range 2 { // a second Cancel gives nothing back twice
		if err := hold.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 6 || u.Remaining != 4 {
		t.Errorf("after cancelling the hold: used %d remaining %d, want 6 and 4", u.Used, u.Remaining)
	}
	if err := first.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 0 || !u.Reset.IsZero() {
		t.Errorf("after cancelling both: used %d reset %v, want 0 and none", u.Used, u.Reset)
	}
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Error("the whole capacity refused after every call was cancelled")
	}
	// Wait with a context that ends gives the hold back.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Wait(wctx, s, charge("b", 5, lim))
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for mustUsage(t, l, s, "b", lim).Held != 5 {
		if time.Now().After(deadline) {
			t.Fatal("the waiting call never took its hold")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Wait returned no error when its context ended")
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 10 || u.Held != 0 || !u.Reset.Equal(clock.Now().Add(10*time.Second)) {
		t.Errorf("after the waiter gave up: used %d held %d full at %v, want 10, 0 and in 10s", u.Used, u.Held, u.Reset)
	}
}

// testBucketSettle: a refund frees room at once; an extra charge counts
// even when the bucket is empty, and later calls wait for it.
func testBucketSettle(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(100, 100, 100*time.Second) // a unit a second
	r := mustAllow(t, l, s, charge("b", 80, lim))
	if err := r.Settle(ctx, "b", 30); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 30 {
		t.Errorf("after settling 80 as 30: used %d, want 30", u.Used)
	}
	r2 := mustAllow(t, l, s, charge("b", 70, lim))
	if !r2.OK() {
		t.Fatal("the refunded room refused")
	}
	// The upstream spent 20 more than the 70 counted: the bucket is 20
	// below empty, and a unit fits in 21s.
	if err := r2.Settle(ctx, "b", 90); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 120 || u.Remaining != 0 {
		t.Errorf("after an extra charge: used %d remaining %d, want 120 and 0", u.Used, u.Remaining)
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() || r.RetryAfter() != 21*time.Second {
		t.Errorf("after an extra charge: OK=%v RetryAfter=%v, want refused for 21s", r.OK(), r.RetryAfter())
	}
	// Settling back to the estimate gives the extra back.
	if err := r2.Settle(ctx, "b", 70); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 100 {
		t.Errorf("after settling back: used %d, want 100", u.Used)
	}
}

// testBucketRefundBound: a call's refund is cut by what the bucket refilled
// after it while later calls counted on its units: giving them all back
// would let a burst after the refund go over C + R·Δt.
func testBucketRefundBound(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second) // a unit a second
	early := mustAllow(t, l, s, charge("b", 10, lim))
	clock.Add(10 * time.Second) // full again
	if r := mustAllow(t, l, s, charge("b", 10, lim)); !r.OK() {
		t.Fatal("a bucket full again refused its capacity")
	}
	// Were the first call's 10 units given back, 10 more would fit now:
	// 20 within an instant. Its units were repaid before the second call.
	if err := early.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() {
		t.Fatal("a refund of repaid units let the bucket go over its capacity")
	}
	// Half repaid: a call of 6 admitted at +20s, another of 4 at +24s (the
	// bucket empty again), then the first refunded: 6 units less 4s of
	// refill (4 units) come back, 2.
	clock.Add(10 * time.Second)
	a := mustAllow(t, l, s, charge("b", 6, lim))
	clock.Add(4 * time.Second)
	if r := mustAllow(t, l, s, charge("b", 8, lim)); !r.OK() {
		t.Fatal("8 units refused with 8 in the bucket")
	}
	if err := a.Settle(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 8 {
		t.Errorf("after a late refund of 6: used %d, want 8 (10 less the 2 still owed)", u.Used)
	}
}

// testBucketBesideDay: a token bucket and a daily window on one charge,
// and a second bucket's charge, decided together: all or nothing.
func testBucketBesideDay(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	rpm := TokenBucket(5, 5, time.Minute)
	day := PerDay(12, time.UTC)
	tokens := TokenBucket(1000, 1000, time.Minute)
	call := func(units int64) []Demand {
		return []Demand{charge("requests", 1, rpm, day), charge("tokens", units, tokens)}
	}
	for i := range 5 {
		if r := mustAllow(t, l, s, call(100)...); !r.OK() {
			t.Fatalf("call %d refused", i)
		}
	}
	// The request bucket is empty: nothing is counted anywhere.
	r := mustAllow(t, l, s, call(100)...)
	if r.OK() || r.RetryAfter() != 12*time.Second {
		t.Fatalf("the sixth call: OK=%v RetryAfter=%v, want refused for 12s", r.OK(), r.RetryAfter())
	}
	if c, ok := r.Constraint(); !ok || c.Bucket != "requests" || c.Limit != rpm {
		t.Errorf("the refusal's constraint: %+v %v, want the request bucket", c, ok)
	}
	if u := mustUsage(t, l, s, "tokens", tokens); u.Used != 500 {
		t.Errorf("tokens used %d, want 500: the refused call counted", u.Used)
	}
	if u := mustUsage(t, l, s, "requests", day); u.Used != 5 {
		t.Errorf("day used %d, want 5", u.Used)
	}
	// The token bucket refuses: nothing counted in the others either.
	clock.Add(time.Minute)
	if r := mustAllow(t, l, s, call(600)...); !r.OK() {
		t.Fatal("600 tokens refused with 1000 in the bucket")
	}
	r = mustAllow(t, l, s, call(600)...)
	if r.OK() {
		t.Fatal("600 tokens admitted with 400 in the bucket")
	}
	if u := mustUsage(t, l, s, "requests", day); u.Used != 6 {
		t.Errorf("day used %d, want 6", u.Used)
	}
	// The day runs out before the bucket: a hold goes to midnight, where
	// both have room, and is counted in both.
	for range 6 {
		clock.Add(time.Minute)
		if r := mustAllow(t, l, s, call(1)...); !r.OK() {
			t.Fatal("a call within the day refused")
		}
	}
	hold, err := l.Reserve(ctx, s, -1, call(1)...)
	if err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	if !hold.OK() || !hold.Time().Equal(midnight) {
		t.Fatalf("a hold past the day's limit: OK=%v at %v, want midnight", hold.OK(), hold.Time())
	}
	if u := mustUsage(t, l, s, "requests", rpm); u.Used != 5 || u.Held != 1 || !u.Reset.Equal(midnight.Add(12*time.Second)) {
		t.Errorf("the request bucket with a hold at midnight: used %d held %d full at %v, want 5 (nothing fits before midnight), 1, and 00:00:12",
			u.Used, u.Held, u.Reset)
	}
	// A bucket-only call queues behind the hold.
	r, err = l.Reserve(ctx, s, -1, charge("requests", 1, rpm))
	if err != nil || !r.OK() || r.Time().Before(midnight) {
		t.Errorf("a call behind the hold: OK=%v at %v err=%v, want no earlier than midnight", r.OK(), r.Time(), err)
	}
}

// testBucketUsage: Usage reads the level, the capacity and when the bucket
// is full again.
func testBucketUsage(t *testing.T, b *backend) {
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 5, 10*time.Second) // a unit every 2s
	if u := mustUsage(t, l, s, "b", lim); u.Used != 0 || u.Remaining != 10 || !u.Reset.IsZero() || !u.NextFree.IsZero() {
		t.Errorf("a bucket never used: %+v, want full", u)
	}
	mustAllow(t, l, s, charge("b", 7, lim))
	clock.Add(time.Second)
	u := mustUsage(t, l, s, "b", lim)
	if u.Used != 7 || u.Remaining != 3 {
		t.Errorf("7 spent a second ago: used %d remaining %d, want 7 (6.5 rounded up) and 3", u.Used, u.Remaining)
	}
	if want := bucketStart.Add(14 * time.Second); !u.Reset.Equal(want) {
		t.Errorf("full again at %v, want %v", u.Reset, want)
	}
	if want := bucketStart.Add(2 * time.Second); !u.NextFree.Equal(want) {
		t.Errorf("next unit at %v, want %v", u.NextFree, want)
	}
}

// testBucketRecord: units recorded count whatever the level.
func testBucketRecord(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	mustAllow(t, l, s, charge("b", 8, lim))
	if err := l.Record(ctx, s, charge("b", 5, lim)); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 13 {
		t.Errorf("8 admitted and 5 recorded: used %d, want 13", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 1, lim)); r.OK() || r.RetryAfter() != 4*time.Second {
		t.Errorf("after the record: OK=%v RetryAfter=%v, want refused for 4s", r.OK(), r.RetryAfter())
	}
}

// testBucketFastAgrees: the common decision (bucketfast.lua) and the
// general one decide a random sequence alike: a clock before 2001 takes
// the general path alone.
func testBucketFastAgrees(t *testing.T, b *backend) {
	early := time.Date(1999, 7, 1, 12, 0, 0, 0, time.UTC)
	fastClock, slowClock := testclock.New(bucketStart), testclock.New(early)
	fast := b.limiter(t, WithClock(fastClock.Now))
	slow := b.limiter(t, WithClock(slowClock.Now))
	lim := TokenBucket(20, 7, 3*time.Second)
	tokens := TokenBucket(500, 300, time.Second)
	rng := rand.New(rand.NewPCG(3, 25))
	for i := range 300 {
		d := time.Duration(rng.Int64N(400_000)) * time.Microsecond
		fastClock.Add(d)
		slowClock.Add(d)
		n := 1 + rng.Int64N(20)
		charges := []Demand{charge("b", n, lim)}
		if i%2 == 1 { // a call charging two buckets, as requests and tokens
			charges = append(charges, charge("tokens", 1+rng.Int64N(500), tokens))
		}
		rf := mustAllow(t, fast, scope(t, "fast"), charges...)
		rs := mustAllow(t, slow, scope(t, "slow"), charges...)
		if _, took := rf.reply.(string); took != rf.OK() {
			t.Fatalf("call %d: admitted %v, by the common decision %v: every admission with no hold or pause takes it", i, rf.OK(), took)
		}
		if _, took := rs.reply.(string); took {
			t.Fatalf("call %d: a clock before 2001 took the common decision", i)
		}
		if rf.OK() != rs.OK() || rf.Remaining() != rs.Remaining() || rf.RetryAfter() != rs.RetryAfter() ||
			rf.RemainingOf("tokens") != rs.RemainingOf("tokens") {
			t.Fatalf("call %d: fast OK=%v remaining %d/%d retry %v; general OK=%v remaining %d/%d retry %v",
				i, rf.OK(), rf.Remaining(), rf.RemainingOf("tokens"), rf.RetryAfter(), rs.OK(), rs.Remaining(), rs.RemainingOf("tokens"), rs.RetryAfter())
		}
	}
}

// testBucketTTL: the state lives until the bucket is full again, and a
// period more; a full bucket keeps no key.
func testBucketTTL(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t)
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	r := mustAllow(t, l, s, charge("b", 5, lim))
	key := l.window(s, "b", lim).meta
	ttl, err := b.client.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < 15*time.Second || ttl > 17*time.Second {
		t.Errorf("TTL %v, want about 16s (full in 5s, a period and a second more)", ttl)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.client.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("a full bucket's key: exists %d (err %v), want gone", n, err)
	}
}

// testBucketAnnounce: an upstream that counts more units out of its
// bucket than tollgate does (spent by others) makes tollgate count them,
// once however many processes read it; one that counts fewer gets nothing
// back.
func testBucketAnnounce(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(100, 100, 100*time.Second) // a unit a second
	mustAllow(t, l, s, charge("b", 10, lim))
	a := Announcement{Used: 25, Limit: 100, Reset: clock.Now().Add(25 * time.Second)}
	for range 2 { // a second process reading the same announcement
		if _, err := l.Announce(ctx, s, "b", a, lim); err != nil {
			t.Fatal(err)
		}
		if u := mustUsage(t, l, s, "b", lim); u.Used != 25 || !u.Reset.Equal(a.Reset) {
			t.Errorf("after the upstream announced 25 used: used %d full at %v, want 25 and %v", u.Used, u.Reset, a.Reset)
		}
	}
	fewer := Announcement{Used: 5, Limit: 100, Reset: clock.Now().Add(26 * time.Second)}
	if _, err := l.Announce(ctx, s, "b", fewer, lim); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "b", lim); u.Used != 25 {
		t.Errorf("after the upstream announced fewer: used %d, want 25: nothing given back", u.Used)
	}
	if r := mustAllow(t, l, s, charge("b", 76, lim)); r.OK() || r.RetryAfter() != time.Second {
		t.Errorf("76 of the 75 left: OK=%v RetryAfter=%v, want refused for 1s", r.OK(), r.RetryAfter())
	}
}

// testBucketBackground: a background call on a bucket is admitted only
// when it fits now and no interactive hold waits, and never holds.
func testBucketBackground(t *testing.T, b *backend) {
	ctx := context.Background()
	bg := WithPriority(ctx, Background)
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	lim := TokenBucket(10, 10, 10*time.Second)
	mustAllow(t, l, s, charge("b", 10, lim))
	hold, err := l.Reserve(ctx, s, -1, charge("b", 2, lim))
	if err != nil || !hold.OK() || hold.Delay() != 2*time.Second {
		t.Fatalf("the interactive hold: OK=%v Delay=%v err=%v, want 2s", hold.OK(), hold.Delay(), err)
	}
	clock.Add(time.Second)
	if r, err := l.Reserve(bg, s, 0, charge("b", 1, lim)); err != nil || r.OK() {
		t.Fatalf("a background call while an interactive hold waits: OK=%v err=%v, want refused", r.OK(), err)
	}
	clock.Add(4 * time.Second) // 5 units back, 2 of them the hold's: 3 left
	for i := range 4 {
		r, err := l.Reserve(bg, s, 0, charge("b", 1, lim))
		if err != nil {
			t.Fatal(err)
		}
		if r.OK() != (i < 3) || r.Delay() != 0 {
			t.Fatalf("background call %d with 3 left: OK=%v Delay=%v, want the first 3, never a hold", i+1, r.OK(), r.Delay())
		}
	}
}

// TestTokenBucketValidate: a token bucket is neither a day nor a fixed
// window, refills by a positive amount, and keeps its capacity times its
// period within what the engine counts exactly.
func TestTokenBucketValidate(t *testing.T) {
	for _, tc := range []struct {
		lim Limit
		ok  bool
	}{
		{TokenBucket(4000, 4000, time.Minute), true},
		{TokenBucket(1, 1, time.Microsecond), true},
		{TokenBucket(30_000_000, 1, time.Minute), true},
		{TokenBucket(40_000_000, 1, time.Minute), false}, // 2.4e15 > 2^51 µs·units
		{TokenBucket(10, 10, 0), false},
		{TokenBucket(0, 10, time.Second), false},
		{Limit{Units: 10, Window: time.Second, Refill: -1}, false},
		{Limit{Units: 10, Calendar: true, Location: time.UTC, Refill: 1}, false},
		{Limit{Units: 10, Window: time.Second, Fixed: true, Refill: 1}, false},
	} {
		if err := tc.lim.Validate(); (err == nil) != tc.ok {
			t.Errorf("%v: Validate() = %v, want ok %v", tc.lim, err, tc.ok)
		} else if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", tc.lim, err)
		}
	}
	if got, want := TokenBucket(4000, 3000, time.Minute).String(), "4000+3000/1m0s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// A bucket and a window of one period are two limits of a bucket, with
	// keys of their own.
	c := Demand{Bucket: "b", Units: 1, Limits: []Limit{TokenBucket(10, 10, time.Minute), PerWindow(10, time.Minute)}}
	if _, err := (&Limiter{}).checkCharges("s", []Demand{c}); err != nil {
		t.Errorf("a bucket beside a window of its period: %v", err)
	}
}

// TestBucketLearnedLimit: a description whose announced first limit is a
// token bucket enforces the announced limit, less the reserve, as its
// capacity and its refill a period.
func TestBucketLearnedLimit(t *testing.T) {
	d := Description{Scope: "s", Bucket: "requests", Announced: "anthropic/requests", ReservePercent: 10,
		Limits: []Limit{TokenBucket(50, 50, time.Minute)}}
	got := d.Enforced(Announced{Limit: 4000, Reset: time.Unix(1, 0)}, true)
	if want := TokenBucket(3600, 3600, time.Minute); len(got) != 1 || got[0] != want {
		t.Errorf("Enforced = %v, want [%v]", got, want)
	}
}

// testBucketPause: a pause of the bucket, or of the scope, stops a token
// bucket's decisions, alone or with another bucket, until it ends.
func testBucketPause(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(bucketStart)
	l := b.limiter(t, WithClock(clock.Now))
	s := scope(t, "s")
	rpm := TokenBucket(10, 10, 10*time.Second)
	tokens := TokenBucket(1000, 1000, 10*time.Second)
	both := []Demand{charge("requests", 1, rpm), charge("tokens", 100, tokens)}
	for _, pause := range []struct {
		bucket  string
		charges []Demand
	}{{"requests", both[:1]}, {"requests", both}, {"tokens", both}, {"", both}} {
		if err := l.Pause(ctx, s, pause.bucket, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		r := mustAllow(t, l, s, pause.charges...)
		c, ok := r.Constraint()
		if r.OK() || r.RetryAfter() != 5*time.Second || !ok || !c.Paused || c.Bucket != pause.bucket {
			t.Errorf("paused %q: OK=%v RetryAfter=%v constraint %+v %v, want refused for 5s by that pause",
				pause.bucket, r.OK(), r.RetryAfter(), c, ok)
		}
		clock.Add(5 * time.Second)
		if r := mustAllow(t, l, s, pause.charges...); !r.OK() {
			t.Errorf("after the pause of %q: refused", pause.bucket)
		}
	}
}
