package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/quota"
)

// The handoff: a request that reaches the base transport later than
// Transit after its admission is decided again. tollgate.SlowHandoff
// slows the path to the handoff as a loaded machine or a slow hook would.

// whoKey marks a request's context with its name, for the decision hook.
type whoKey struct{}

// decisionsOf collects the admitted decisions' instants per request name.
type decisionsOf struct {
	mu   sync.Mutex
	at   map[string][]time.Time // admitted
	errs map[string][]error     // not admitted
}

func (d *decisionsOf) hook(ctx context.Context, ev tollgate.Decision) {
	who, _ := ctx.Value(whoKey{}).(string)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at, d.errs = map[string][]time.Time{}, map[string][]error{}
	}
	if ev.Admitted {
		d.at[who] = append(d.at[who], ev.At)
	} else {
		d.errs[who] = append(d.errs[who], ev.Err)
	}
}

func (d *decisionsOf) admitted(who string) []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at[who]...)
}

func (d *decisionsOf) refused(who string) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.errs[who]...)
}

func named(who string) context.Context {
	return context.WithValue(context.Background(), whoKey{}, who)
}

// TestLateHandoffKeepsTheWindow: request A is admitted, and while its
// path to the base transport is held up, request B waits its turn (a
// window and Transit after A's admission) and is sent. Sent as admitted,
// A would then reach the upstream in one window with B, 2 calls against a
// limit of 1; decided again, it waits its own turn behind B.
func TestLateHandoffKeepsTheWindow(t *testing.T) {
	_, rc := realRedis(t)
	up := newUpstream(t)
	window, transit := 300*time.Millisecond, 100*time.Millisecond
	var d decisionsOf
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(1, window), Transit: transit,
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: time.Minute}, nil), Trace: tollgate.Trace{Decided: d.hook},
	})
	var handoffs atomic.Int32
	var errB error
	tollgate.SlowHandoff(tr, func() {
		if handoffs.Add(1) == 1 { // A's first: B goes first, all the way
			_, errB = send(t, tr, named("B"), "GET", up.URL+"/v1/items", nil)
		}
	})
	if _, err := send(t, tr, named("A"), "GET", up.URL+"/v1/items", nil); err != nil {
		t.Fatalf("A: %v", err)
	}
	if errB != nil {
		t.Fatalf("B: %v", errB)
	}

	a, b := d.admitted("A"), d.admitted("B")
	if len(a) < 2 || len(b) < 1 {
		t.Errorf("A was admitted %d times and B %d; want A decided again after its late handoff", len(a), len(b))
	} else if gap := a[len(a)-1].Sub(b[len(b)-1]); gap < window+transit {
		t.Errorf("A was admitted again %v after B, want at least a window and Transit (%v)", gap, window+transit)
	}
	up.mu.Lock()
	var calls []windowcheck.Call
	for _, a := range up.arrivals {
		calls = append(calls, windowcheck.Call{At: a.at, Units: 1})
	}
	up.mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("the upstream received %d calls, want A and B", len(calls))
	}
	if most, end := windowcheck.Most(calls, window); most > 1 {
		t.Errorf("%d calls reached the upstream within the %v window ending %v, over the limit of 1", most, window, end)
	}
}

// TestLateHandoffGivesItsUnitsBack: a request held up on its way to the
// base transport is decided again and sent once; its first admission is
// given back, so that the quota counts it once.
func TestLateHandoffGivesItsUnitsBack(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	transit := 100 * time.Millisecond
	var d decisionsOf
	tr := newTransport(t, tollgate.Config{
		Limiter: lim, Costs: table(t), Buckets: buckets(10, time.Hour), Transit: transit,
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil), Trace: tollgate.Trace{Decided: d.hook},
	})
	var handoffs atomic.Int32
	tollgate.SlowHandoff(tr, func() {
		if handoffs.Add(1) == 1 {
			time.Sleep(3 * transit)
		}
	})
	if _, err := send(t, tr, named("A"), "GET", up.URL+"/v1/items", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(d.admitted("A")); n < 2 {
		t.Errorf("the request was decided %d times, want again after its late handoff", n)
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d calls, want 1", up.count())
	}
	u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", quota.PerWindow(10, time.Hour+transit))
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 1 {
		t.Errorf("the pool counts %d units, want 1: the late admission given back", u.Used)
	}
}

// TestLateEveryTimeFails: a request whose every handoff is late is decided
// again a bounded number of times, then fails, not blaming the quota,
// with every admission given back and its body closed once.
func TestLateEveryTimeFails(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	transit := 20 * time.Millisecond
	var d decisionsOf
	tr := newTransport(t, tollgate.Config{
		Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Hour), Transit: transit, Trace: tollgate.Trace{Decided: d.hook},
	})
	tollgate.SlowHandoff(tr, func() { time.Sleep(2 * transit) })
	body := newBody("payload")
	req, _ := http.NewRequestWithContext(named("A"), "POST", up.URL+"/v1/upload", body)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	if err == nil || errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Fatalf("RoundTrip = %v, want an error that blames the late handoff, not the quota", err)
	}
	if n := len(d.admitted("A")); n != 5 {
		t.Errorf("the request was admitted %d times, want 5", n)
	}
	if errs := d.refused("A"); len(errs) != 1 || errs[0] != err {
		t.Errorf("the decision hook saw %v not sent, want once, with %v", errs, err)
	}
	if c := body.closes.Load(); c != 1 {
		t.Errorf("the body was closed %d times, want once", c)
	}
	if up.count() != 0 {
		t.Errorf("the upstream received %d calls, want none", up.count())
	}
	u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", quota.PerWindow(1000, time.Hour+transit))
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 0 {
		t.Errorf("the pool counts %d units, want 0: every admission given back", u.Used)
	}
}
