package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	spendrec "github.com/tollgate/tollgate/internal/spend"
)

// quotaUpstream is a simulated upstream with a quota of its own: it
// answers 200 to its first quota requests, then 429 with Retry-After.
func quotaUpstream(t *testing.T, quota int) *upstream {
	up := newUpstream(t)
	var served atomic.Int32
	up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		if served.Add(1) > int32(quota) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	})
	return up
}

// shadowTrace counts what a Transport's Trace is told.
type shadowTrace struct {
	mu                      sync.Mutex
	decided, waits, wouldBe []tollgate.Decision
}

func (s *shadowTrace) trace() tollgate.Trace {
	add := func(to *[]tollgate.Decision) func(context.Context, tollgate.Decision) {
		return func(_ context.Context, d tollgate.Decision) {
			s.mu.Lock()
			defer s.mu.Unlock()
			*to = append(*to, d)
		}
	}
	return tollgate.Trace{Decided: add(&s.decided), WaitStarted: add(&s.waits), WouldRefuse: add(&s.wouldBe)}
}

func (s *shadowTrace) counts() (decided, waits, wouldBe int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.decided), len(s.waits), len(s.wouldBe)
}

// TestShadowSendsEveryRequest: in shadow, against an upstream whose
// quota is above tollgate's limit, every request is sent at once, none
// waits, and those past the limit are told as would-be refusals (Trace,
// and the record of what the process spends); their units count in the
// window as the upstream spent them. When the upstream itself answers 429,
// its pause stops shadow requests as it stops any.
func TestShadowSendsEveryRequest(t *testing.T) {
	s := redistest.Start(t)
	up := quotaUpstream(t, 14)
	var tr shadowTrace
	shadow := spendTransport(t, s, "shadow", tollgate.Policy{OnRefusal: tollgate.Shadow}, tr.trace())
	ctx := tollgate.WithCaller(context.Background(), "cron")

	// tollgate's pool holds 10 (buckets(10, time.Hour)); the upstream's
	// quota is 14 requests.
	for i := range 14 {
		if _, err := send(t, shadow, ctx, "GET", up.URL+"/v1/items", nil); err != nil {
			t.Fatalf("request %d in shadow: %v", i+1, err)
		}
	}
	if n := up.count(); n != 14 {
		t.Fatalf("the upstream got %d requests, want all 14", n)
	}
	decided, waits, wouldBe := tr.counts()
	if decided != 14 || waits != 0 || wouldBe != 4 {
		t.Fatalf("the Trace was told %d decisions, %d waits, %d would-be refusals; want 14, none, 4", decided, waits, wouldBe)
	}
	for i, d := range tr.wouldBe {
		var qe *tollgate.QuotaError
		if !d.Shadow || !d.Admitted || !errors.As(d.Err, &qe) || qe.Cause != tollgate.NoRoom || qe.Bucket != "pool" || d.RetryAfter <= 0 || d.Caller != "cron" {
			t.Errorf("would-be refusal %d: %+v; want a shadow decision, admitted, for no room in pool, with RetryAfter, of cron", i, d)
		}
	}
	shadowed := 0
	for _, d := range tr.decided {
		if !d.Admitted || d.Err != nil {
			t.Errorf("decision %+v: want admitted", d)
		}
		if d.Shadow {
			shadowed++
		}
	}
	if shadowed != 4 {
		t.Errorf("%d decisions say Shadow, want 4", shadowed)
	}
	// The upstream spent 14: so does the window.
	if u, err := shadow.Usage(context.Background(), tollgate.DefaultScope, "pool"); err != nil || len(u) != 1 || u[0].Used != 14 {
		t.Errorf("Usage: %+v, %v; want 14 used", u, err)
	}

	// The upstream's quota is spent: it answers 429, which pauses the scope.
	if _, err := send(t, shadow, ctx, "GET", up.URL+"/v1/items", nil); !isCause(err, tollgate.PausedByUpstream) {
		t.Fatalf("the 15th request: %v, want the upstream's 429 as a pause", err)
	}
	// The pause stops shadow requests: refused at once, not sent.
	for range 3 {
		if _, err := send(t, shadow, ctx, "GET", up.URL+"/v1/items", nil); !isCause(err, tollgate.PausedByUpstream) {
			t.Fatalf("a request during the upstream's pause: %v, want refused for it", err)
		}
	}
	if n := up.count(); n != 15 {
		t.Errorf("the upstream got %d requests, want 15: none during its pause", n)
	}
	if _, waits, wouldBe := tr.counts(); waits != 0 || wouldBe != 5 {
		t.Errorf("%d waits, %d would-be refusals; want none, 5 (the 15th too)", waits, wouldBe)
	}

	// status's record: the units, the would-be refusals, the pause's.
	at := time.Now()
	flushSpending(t, shadow, at)
	reports, err := spendrec.Read(context.Background(), s.Client(t), "", tollgate.DefaultScope, at)
	if err != nil || len(reports) != 1 {
		t.Fatalf("reports: %+v, %v; want one", reports, err)
	}
	sums := spendrec.Summarize(reports)
	var spent int64
	refused := map[spendrec.Cause]int64{}
	for _, sum := range sums {
		spent += sum.Units
		for c, n := range sum.Refused {
			refused[c] += n
		}
	}
	if spent != 15 || refused[spendrec.WouldRefuse] != 5 || refused[spendrec.UpstreamPause] != 3 || len(refused) != 2 {
		t.Errorf("the record: %d units, refused %v; want 15 units, 5 would-refuse, 3 upstream-pause", spent, refused)
	}
}

// TestShadowOperatorPause: an operator's pause stops a shadow request at
// once: not sent, not waiting, no would-be refusal.
func TestShadowOperatorPause(t *testing.T) {
	s := redistest.Start(t)
	up := newUpstream(t)
	var tr shadowTrace
	shadow := spendTransport(t, s, "shadow", tollgate.Policy{OnRefusal: tollgate.Shadow}, tr.trace())
	if _, err := limiterOn(t, s.Client(t)).PauseBecause(context.Background(), tollgate.DefaultScope, "", time.Minute, "incident"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := get(t, shadow, up.URL+"/v1/items"); !isCause(err, tollgate.PausedByOperator) {
			t.Fatalf("a shadow request during an operator's pause: %v, want refused for it", err)
		}
	}
	if decided, waits, wouldBe := tr.counts(); up.count() != 0 || decided != 2 || waits != 0 || wouldBe != 0 {
		t.Errorf("sent %d, decided %d, waited %d, would-be refusals %d; want 0, 2, 0, 0", up.count(), decided, waits, wouldBe)
	}
}

// TestShadowPolicyChecked: Shadow is an OnRefusal action; as
// AfterFailover it is refused by New, in words.
func TestShadowPolicyChecked(t *testing.T) {
	_, err := tollgate.New(tollgate.Config{
		Limiter: inProcess(t), Costs: table(t), Buckets: buckets(10, time.Hour),
		Routes: []tollgate.Route{{Name: "b", Scope: "b"}},
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.Shadow}, nil),
	})
	if !errors.Is(err, tollgate.ErrConfig) || !strings.Contains(err.Error(), "AfterFailover cannot be Shadow") {
		t.Errorf("New with AfterFailover Shadow: %v, want a configuration error saying so", err)
	}
	if got := tollgate.Shadow.String(); got != "shadow" {
		t.Errorf("Shadow.String() = %q", got)
	}
}
