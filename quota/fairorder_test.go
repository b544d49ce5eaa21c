package quota

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// waited is what a call decided on another goroutine returned.
type waited struct {
	r   *Reservation
	err error
}

// String says what the call returned.
func (w waited) String() string {
	if w.err != nil {
		return w.err.Error()
	}
	return fmt.Sprintf("OK=%v at %v", w.r.OK(), w.r.Time())
}

// reserveAside runs Reserve on another goroutine and returns where its
// answer will come.
func reserveAside(ctx context.Context, l *Limiter, scope string, maxWait time.Duration, c Demand) <-chan waited {
	out := make(chan waited, 1)
	go func() {
		r, err := l.Reserve(ctx, scope, maxWait, c)
		out <- waited{r, err}
	}()
	return out
}

// inRoom waits until n calls wait in the room of bucket in scope.
func inRoom(t *testing.T, b *backend, l *Limiter, scope, bucket string, n int64) {
	t.Helper()
	key := l.fairRoomKeys(scope, bucket)[0]
	var got int64
	for range 500 {
		var err error
		if got, err = b.client.ZCard(context.Background(), key).Result(); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d calls wait in the room, want %d", got, n)
}

// decided waits until the call decided aside on ch waits in the room of
// bucket in scope, or has answered (a hold, as without the room), and
// returns where its answer comes.
func decided(t *testing.T, b *backend, l *Limiter, scope, bucket string, ch <-chan waited) <-chan waited {
	t.Helper()
	key := l.fairRoomKeys(scope, bucket)[0]
	for range 500 {
		select {
		case w := <-ch:
			out := make(chan waited, 1)
			out <- w
			return out
		default:
		}
		n, err := b.client.ZCard(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return ch
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the call neither waits in the room nor answered")
	return nil
}

// answer returns the answer of a call decided aside, failing when none
// comes within a few seconds.
func answer(t *testing.T, ch <-chan waited) waited {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return waited{}
	}
}

// sharedDay is a day of units shared by tenants a and b (weight 1 each,
// Lendable 0) on a limiter whose clock stands at 10:00 on 1 June 2026.
type sharedDay struct {
	t      *testing.T
	clock  *testclock.Clock
	l      *Limiter
	scope  string
	shares *Shares
	units  int64
}

// newSharedDay returns a sharedDay of units, tenants idle after idle.
func newSharedDay(t *testing.T, b *backend, units int64, idle time.Duration) *sharedDay {
	clock := testclock.New(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	return &sharedDay{t: t, clock: clock, l: b.limiter(t, WithClock(clock.Now)), scope: scope(t, "s"),
		shares: &Shares{Weights: map[string]float64{"a": 1, "b": 1}, Idle: idle}, units: units}
}

// charge is tenant's demand of units on the day.
func (d *sharedDay) charge(tenant string, units int64) Demand {
	return Demand{Bucket: "b", Units: units, Limits: []Limit{PerDay(d.units, time.UTC)}, Shares: d.shares, Tenant: tenant}
}

// allow reports whether tenant's units are admitted now.
func (d *sharedDay) allow(tenant string, units int64) bool {
	d.t.Helper()
	r, err := d.l.Allow(context.Background(), d.scope, d.charge(tenant, units))
	if err != nil {
		d.t.Fatal(err)
	}
	return r.OK()
}

// testBelowShareFirst: tenant a, at its share, asks for more on a full
// day and waits; tenant b, below its share, asks later and is admitted
// now, not behind a's wait (a hold of a's for midnight would have put b's
// call at midnight too). At midnight a is admitted.
func testBelowShareFirst(t *testing.T, b *backend) {
	ctx := context.Background()
	d := newSharedDay(t, b, 100, time.Hour)
	clock, l, s, charge := d.clock, d.l, d.scope, d.charge
	if r, err := l.Allow(ctx, s, charge("a", 50)); err != nil || !r.OK() {
		t.Fatalf("a's first 50 units: OK=%v err=%v", r.OK(), err)
	}
	first := decided(t, b, l, s, "b", reserveAside(ctx, l, s, 24*time.Hour, charge("a", 10)))
	r, err := l.Reserve(ctx, s, 24*time.Hour, charge("b", 10))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || !r.Time().Equal(clock.Now()) {
		t.Fatalf("b below its share, after a waits: OK=%v at %v, want admitted now (%v)", r.OK(), r.Time(), clock.Now())
	}
	midnight := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	clock.Set(midnight)
	if w := answer(t, first); w.err != nil || !w.r.OK() || !w.r.Time().Equal(midnight) {
		t.Fatalf("a's wait: %v; want admitted at midnight", w)
	}
	inRoom(t, b, l, s, "b", 0)
}

// testTenantInArrivalOrder: within a tenant, first come first served. a
// waits in the room (at its share while c, not listed, is active); once c
// goes idle a is below its share, and a later, smaller call of a's that
// would fit now waits behind the first; b, below its share, still goes
// before both. When a's first call gives up, the later one is admitted.
func testTenantInArrivalOrder(t *testing.T, b *backend) {
	ctx := context.Background()
	// Idle shorter than a waiter's place lasts unless renewed (SlotTTL):
	// the clock below moves past it while a's first call waits.
	d := newSharedDay(t, b, 90, 2*time.Second)
	clock, l, s, charge, allow := d.clock, d.l, d.scope, d.charge, d.allow
	// c's request, refused, makes it active: the shares are 30 each.
	if allow("c", 60) {
		t.Fatal("c's 60 units admitted beyond what a and b keep")
	}
	if !allow("a", 30) {
		t.Fatal("a's share of 30 refused")
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := decided(t, b, l, s, "b", reserveAside(wctx, l, s, 24*time.Hour, charge("a", 16)))
	clock.Add(3 * time.Second) // c idle: shares of 45, a below its own
	if allow("a", 15) {
		t.Fatal("a's later 15 units admitted before its first call, which waits")
	}
	if !allow("b", 45) {
		t.Fatal("b below its share refused while a waits")
	}
	cancel()
	if w := answer(t, first); !errors.Is(w.err, context.Canceled) {
		t.Fatalf("a's first call, given up: %v, want context.Canceled", w.err)
	}
	inRoom(t, b, l, s, "b", 0)
	if !allow("a", 15) {
		t.Fatal("a's 15 units refused once nothing of it waits")
	}
}

// testBackgroundWaitsOnShares: a background call on a bucket with shares
// waits its turn in the bucket's room (rather than being refused at once)
// and yields to an interactive call arriving later.
func testBackgroundWaitsOnShares(t *testing.T, b *backend) {
	ctx := context.Background()
	d := newSharedDay(t, b, 100, time.Hour)
	clock, l, s, charge := d.clock, d.l, d.scope, d.charge
	if r, err := l.Allow(ctx, s, charge("a", 50)); err != nil || !r.OK() {
		t.Fatalf("a's first 50 units: OK=%v err=%v", r.OK(), err)
	}
	bg := decided(t, b, l, s, "b", reserveAside(WithPriority(ctx, Background), l, s, 24*time.Hour, charge("a", 10)))
	if r, err := l.Allow(ctx, s, charge("b", 10)); err != nil || !r.OK() {
		t.Fatalf("b's interactive call while a background one waits: OK=%v err=%v", r.OK(), err)
	}
	midnight := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	clock.Set(midnight)
	if w := answer(t, bg); w.err != nil || !w.r.OK() || !w.r.Time().Equal(midnight) {
		t.Fatalf("the background call: %v; want admitted at midnight", w)
	}
}
