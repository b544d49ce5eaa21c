package tollgate_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	spendrec "github.com/tollgate/tollgate/internal/spend"
)

// spendTransport builds a "process": a Transport on a client of its own, on
// one real redis-server, its writer of what it spends stopped, so
// that the test writes at the instants it chooses.
func spendTransport(t *testing.T, s *redistest.Server, name string, policy tollgate.Policy, trace tollgate.Trace) *tollgate.Transport {
	t.Helper()
	tr := newTransport(t, tollgate.Config{
		Name: name, Transit: -1, Limiter: limiterOn(t, s.Client(t)), Costs: table(t),
		Buckets: buckets(10, time.Hour), Policy: tollgate.Policies(policy, nil), Trace: trace,
		Scope: func(req *http.Request) (string, error) {
			if s := req.URL.Query().Get("scope"); s != "" {
				return s, nil
			}
			return tollgate.DefaultScope, nil
		},
	})
	tollgate.StopSpendWriter(tr)
	return tr
}

func flushSpending(t *testing.T, tr *tollgate.Transport, at time.Time) {
	t.Helper()
	if err := tollgate.FlushSpending(tr, at); err != nil {
		t.Fatal(err)
	}
}

// TestSpendTwoProcesses: two processes of different names spend one
// scope, one of them waits, the other is refused for want of room and by
// an operator's pause; spendrec.Read shows both, with the right units,
// waits and refusal causes, and the callers their contexts named.
func TestSpendTwoProcesses(t *testing.T) {
	s := redistest.Start(t)
	up := newUpstream(t)
	waiting := make(chan struct{}, 1)
	a := spendTransport(t, s, "ingest-a", tollgate.Policy{MaxWait: -1}, tollgate.Trace{
		WaitStarted: func(context.Context, tollgate.Decision) { waiting <- struct{}{} },
	})
	b := spendTransport(t, s, "ingest-b", tollgate.Policy{OnRefusal: tollgate.Refuse}, tollgate.Trace{})
	cron := tollgate.WithCaller(context.Background(), "cron")
	web := tollgate.WithCaller(context.Background(), "web")

	for range 6 {
		if _, err := send(t, a, cron, "GET", up.URL+"/v1/items", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		if _, err := send(t, b, web, "GET", up.URL+"/v1/items", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := send(t, b, web, "GET", up.URL+"/v1/items", nil); !isCause(err, tollgate.NoRoom) {
			t.Fatalf("b's request with the pool spent: %v, want a refusal for no room", err)
		}
	}
	// a waits: its hold is due in an hour, and its context ends it once
	// its wait is written.
	ctx, cancel := context.WithCancel(cron)
	done := make(chan error, 1)
	go func() {
		_, err := send(t, a, ctx, "GET", up.URL+"/v1/items", nil)
		done <- err
	}()
	<-waiting
	at := time.Now()
	flushSpending(t, a, at)
	reports, err := spendrec.Read(context.Background(), s.Client(t), "", tollgate.DefaultScope, at)
	if err != nil || len(reports) != 1 || len(reports[0].Waiting) != 1 {
		t.Fatalf("reports while a waits: %+v, %v; want a's, one waiting", reports, err)
	}
	if w := reports[0].Waiting[0]; w.Bucket != "pool" || w.Caller != "cron" || w.Requests != 1 || w.Since.After(at) || at.Sub(w.Since) > time.Minute {
		t.Errorf("a's wait: %+v, want 1 of cron's waiting on pool since just before %v", w, at)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled wait: %v", err)
	}

	if _, err := limiterOn(t, s.Client(t)).PauseBecause(context.Background(), "other", "pool", time.Minute, "deploy"); err != nil {
		t.Fatal(err)
	}
	// The scope is spent: the pause is of another, which b's requests
	// for ?scope=other spend.
	if _, err := send(t, b, web, "GET", up.URL+"/v1/items?scope=other", nil); !isCause(err, tollgate.PausedByOperator) {
		t.Fatalf("b's request during the pause: %v, want an operator's pause", err)
	}

	later := at.Add(10 * time.Second)
	flushSpending(t, a, later)
	flushSpending(t, b, later)
	reports, err = spendrec.Read(context.Background(), s.Client(t), "", tollgate.DefaultScope, later)
	if err != nil || len(reports) != 2 {
		t.Fatalf("reports: %+v, %v; want two", reports, err)
	}
	got := map[string]spendrec.Report{}
	for _, r := range reports {
		got[r.Process] = r
	}
	if r := got["ingest-a"]; len(r.Spent) != 1 || r.Spent[0] != (spendrec.Spent{Bucket: "pool", Endpoint: "items.list", Caller: "cron", Units: 6}) ||
		len(r.Waiting) != 0 || len(r.Refused) != 0 {
		t.Errorf("a's report: %+v; want 6 units of cron's, none waiting, none refused (a cancelled wait is no refusal)", r)
	}
	wantRefused := spendrec.Refused{Bucket: "pool", Endpoint: "items.list", Caller: "web", Cause: spendrec.NoRoom, Requests: 2}
	if r := got["ingest-b"]; len(r.Spent) != 1 || r.Spent[0] != (spendrec.Spent{Bucket: "pool", Endpoint: "items.list", Caller: "web", Units: 4}) ||
		len(r.Refused) != 1 || r.Refused[0] != wantRefused || len(r.Waiting) != 0 {
		t.Errorf("b's report: %+v; want 4 units of web's, refused %+v", r, wantRefused)
	}
	other, err := spendrec.Read(context.Background(), s.Client(t), "", "other", later)
	wantPaused := spendrec.Refused{Bucket: "pool", Endpoint: "items.list", Caller: "web", Cause: spendrec.OperatorPause, Requests: 1}
	if err != nil || len(other) != 1 || other[0].Process != "ingest-b" || len(other[0].Spent) != 0 || len(other[0].Refused) != 1 || other[0].Refused[0] != wantPaused {
		t.Errorf("the paused scope's reports: %+v, %v; want b's alone, refused %+v", other, err, wantPaused)
	}

	// Close writes what a spent since its last write, and leaves its
	// record, which counts for its span: a still spent in it.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if reports, err := spendrec.Read(context.Background(), s.Client(t), "", tollgate.DefaultScope, later); err != nil || len(reports) != 2 || reports[0].Process != "ingest-a" || len(reports[0].Waiting) != 0 {
		t.Errorf("reports after a closed: %+v, %v; want a's and b's, nothing of a's waiting", reports, err)
	}
}

// isCause reports a *QuotaError of cause c.
func isCause(err error, c tollgate.Cause) bool {
	var qe *tollgate.QuotaError
	return errors.As(err, &qe) && qe.Cause == c
}

// writesOf counts the commands the server ran, but those of the test's
// own reading (INFO) and of connections opening.
func writesOf(t *testing.T, s *redistest.Server) map[string]int64 {
	t.Helper()
	calls := s.Calls(t)
	maps.DeleteFunc(calls, func(name string, _ int64) bool {
		return name == "info" || name == "hello" || strings.HasPrefix(name, "client|")
	})
	return calls
}

// TestSpendIdleWritesNothing: a Transport that spends writes its record
// once; idle, it writes nothing more, however many writes come due; a
// Transport that never spent writes nothing, and closing it neither.
func TestSpendIdleWritesNothing(t *testing.T) {
	s := redistest.Start(t)
	up := newUpstream(t)
	tr := spendTransport(t, s, "busy", tollgate.Policy{}, tollgate.Trace{})
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	before := writesOf(t, s)
	flushSpending(t, tr, at)
	after := writesOf(t, s)
	if after["evalsha"]+after["eval"]-before["evalsha"]-before["eval"] < 1 || after["set"] != before["set"]+1 {
		t.Fatalf("the busy write ran %v, then %v: want one script call, one SET", before, after)
	}
	for i := 1; i <= 30; i++ { // two minutes and a half of writes coming due, idle
		flushSpending(t, tr, at.Add(time.Duration(i)*5*time.Second))
	}
	if idle := writesOf(t, s); !maps.Equal(idle, after) {
		t.Errorf("idle, the server ran %v; want nothing since %v", idle, after)
	}

	before = writesOf(t, s)
	quiet := spendTransport(t, s, "quiet", tollgate.Policy{}, tollgate.Trace{})
	flushSpending(t, quiet, at)
	flushSpending(t, quiet, at.Add(time.Minute))
	if err := quiet.Close(); err != nil {
		t.Fatal(err)
	}
	if calls := writesOf(t, s); !maps.Equal(calls, before) {
		t.Errorf("a Transport that never spent ran %v; want nothing since %v", calls, before)
	}
}

// TestSpendName: a Name spend cannot write is refused by New.
func TestSpendName(t *testing.T) {
	_, err := tollgate.New(tollgate.Config{
		Name: strings.Repeat("x", 300), Limiter: inProcess(t), Costs: table(t), Buckets: buckets(10, time.Hour),
	})
	if !errors.Is(err, tollgate.ErrConfig) || !strings.Contains(err.Error(), "Name") {
		t.Errorf("New with a 300-byte Name: %v, want a configuration error naming Name", err)
	}
}
