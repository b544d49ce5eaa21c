package spend

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keypart"
	"github.com/tollgate/tollgate/internal/redistest"
)

// t0 is the tests' first instant: every flush and read is dated from it,
// never from the clock.
var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func newRecorder(t *testing.T, c redis.UniversalClient, process string) *Recorder {
	t.Helper()
	r, err := New(c, Options{Process: process, Prefix: "test:"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func flush(t *testing.T, r *Recorder, at time.Time) {
	t.Helper()
	if err := r.Flush(context.Background(), at); err != nil {
		t.Fatalf("Flush at %v: %v", at.Sub(t0), err)
	}
}

// writes counts the writes the server ran: each runs one SET, of its
// record (a first EVALSHA answered NOSCRIPT and sent again as EVAL counts
// as two scripts, but one write).
func writes(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	calls := s.Calls(t)
	if calls["set"] != calls["zadd"] {
		t.Fatalf("%d SETs but %d ZADDs: each write runs one of each", calls["set"], calls["zadd"])
	}
	return calls["set"]
}

// TestTwoProcessesOneScope: two processes spend, wait and are refused in
// one scope; the reader has both processes' reports, and the summary the
// top spenders, the waiting requests and the oldest wait, the refusals by
// cause.
func TestTwoProcessesOneScope(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	a := newRecorder(t, c, "web-1/100")
	b := newRecorder(t, c, "web-2/200")

	a.Spend("yt", "pool", "search.list", "php-cron", 100)
	a.Spend("yt", "pool", "search.list", "php-cron", 100)
	a.Spend("yt", "pool", "videos.list", "", 1)
	a.Spend("yt", "search", "search.list", "php-cron", 1)
	a.Refuse("yt", "pool", "search.list", "php-cron", NoRoom)
	wa := a.BeginWait("yt", "pool", "php-cron", t0.Add(-3*time.Second))
	defer wa.End()

	b.Spend("yt", "pool", "videos.list", "node-app", 50)
	b.Refuse("yt", "pool", "videos.list", "node-app", NoRoom)
	b.Refuse("yt", "", "videos.list", "node-app", OperatorPause)
	for range 2 {
		w := b.BeginWait("yt", "pool", "node-app", t0.Add(-7*time.Second))
		defer w.End()
	}
	done := b.BeginWait("yt", "pool", "node-app", t0.Add(-9*time.Second))
	done.End() // no longer waits: the oldest is 7s old

	flush(t, a, t0)
	flush(t, b, t0.Add(time.Second))

	reports, err := Read(ctx, c, "test:", "yt", t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []Report{{
		Process: "web-1/100", Scope: "yt", Format: 1, At: t0, Span: time.Minute, TTL: 15 * time.Second,
		Spent:   []Spent{{"pool", "search.list", "php-cron", 200}, {"pool", "videos.list", "", 1}, {"search", "search.list", "php-cron", 1}},
		Waiting: []Waiting{{"pool", "php-cron", 1, t0.Add(-3 * time.Second)}},
		Refused: []Refused{{"pool", "search.list", "php-cron", NoRoom, 1}},
	}, {
		Process: "web-2/200", Scope: "yt", Format: 1, At: t0.Add(time.Second), Span: time.Minute, TTL: 15 * time.Second,
		Spent:   []Spent{{"pool", "videos.list", "node-app", 50}},
		Waiting: []Waiting{{"pool", "node-app", 2, t0.Add(-7 * time.Second)}},
		Refused: []Refused{{"", "videos.list", "node-app", OperatorPause, 1}, {"pool", "videos.list", "node-app", NoRoom, 1}},
	}}
	if !reflect.DeepEqual(reports, want) {
		t.Fatalf("Read:\n%+v\nwant\n%+v", reports, want)
	}
	all, err := ReadAll(ctx, c, "test:", t0.Add(2*time.Second))
	if err != nil || !reflect.DeepEqual(all, want) {
		t.Fatalf("ReadAll: %+v, %v; want Read's", all, err)
	}

	sum := Summarize(reports)
	wantSum := []Summary{{
		Scope: "yt", Bucket: "",
		Refused: map[Cause]int64{OperatorPause: 1},
	}, {
		Scope: "yt", Bucket: "pool", Units: 251,
		Spenders:  []Spender{{"web-1/100", "php-cron", 200}, {"web-2/200", "node-app", 50}, {"web-1/100", "", 1}},
		Endpoints: []Endpoint{{"search.list", 200}, {"videos.list", 51}},
		Waiting:   3, Since: t0.Add(-7 * time.Second),
		Refused: map[Cause]int64{NoRoom: 2},
	}, {
		Scope: "yt", Bucket: "search", Units: 1,
		Spenders:  []Spender{{"web-1/100", "php-cron", 1}},
		Endpoints: []Endpoint{{"search.list", 1}},
	}}
	if !reflect.DeepEqual(sum, wantSum) {
		t.Fatalf("Summarize:\n%+v\nwant\n%+v", sum, wantSum)
	}

	// One key per process under the scope's hash tag, and the sorted set.
	keys, err := c.Keys(ctx, "test:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]bool{"test:{yt}:spenders": true, "test:{yt}:spender.web-1/100": true, "test:{yt}:spender.web-2/200": true}
	if len(keys) != len(wantKeys) {
		t.Fatalf("keys %q, want %v", keys, wantKeys)
	}
	for _, k := range keys {
		if !wantKeys[k] {
			t.Errorf("key %q, want one of %v", k, wantKeys)
		}
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has TTL %v, want one", k, ttl)
		}
	}
}

// TestIdleWritesNothing: a process writes when something changed or
// waits, and nothing else: not while idle, not to say again what it said.
func TestIdleWritesNothing(t *testing.T) {
	s := redistest.Start(t)
	r := newRecorder(t, s.Client(t), "p")
	at := t0
	step := func(want int64, why string) {
		t.Helper()
		before, scripts := writes(t, s), s.Calls(t)
		flush(t, r, at)
		if got := writes(t, s) - before; got != want {
			t.Errorf("at %v (%s): %d writes, want %d", at.Sub(t0), why, got, want)
		}
		if want == 0 {
			for cmd, n := range s.Calls(t) {
				switch cmd {
				case "info", "hello", "client|setinfo": // Calls' own
				default:
					if n != scripts[cmd] {
						t.Errorf("at %v (%s): %s ran %d times, want no command", at.Sub(t0), why, cmd, n-scripts[cmd])
					}
				}
			}
		}
		at = at.Add(5 * time.Second)
	}
	step(0, "nothing ever recorded")
	r.Spend("s", "b", "e", "", 3)
	step(1, "units spent")
	step(0, "idle")
	step(0, "idle")
	w := r.BeginWait("s", "b", "", at)
	step(1, "a request waits")
	step(1, "it still waits")
	w.End()
	step(1, "it no longer waits")
	step(0, "idle")
	r.BeginWait("s", "b", "", at).End()
	step(0, "a wait began and ended between writes: nothing to say")
	r.Refuse("s", "b", "e", "", CapFull)
	step(1, "a refusal")
	r.Spend("s", "b", "e", "", 1)
	r.Spend("t", "b", "e", "", 1)
	step(2, "units spent in two scopes: one write each")
	for range 20 {
		step(0, "idle, while the span's units age")
	}
}

// TestAtMostOneWritePerInterval: Flush writes at most once per Interval,
// and what it held back is in the next write.
func TestAtMostOneWritePerInterval(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	r := newRecorder(t, c, "p")
	r.Spend("s", "b", "e", "", 1)
	flush(t, r, t0)
	for _, d := range []time.Duration{time.Millisecond, time.Second, 4999 * time.Millisecond} {
		r.Spend("s", "b", "e", "", 10)
		before := writes(t, s)
		flush(t, r, t0.Add(d))
		if got := writes(t, s) - before; got != 0 {
			t.Errorf("%d writes %v after the last, want none", got, d)
		}
	}
	before := writes(t, s)
	flush(t, r, t0.Add(5*time.Second))
	if got := writes(t, s) - before; got != 1 {
		t.Errorf("%d writes an interval after the last, want 1", got)
	}
	reports, err := Read(context.Background(), c, "test:", "s", t0.Add(5*time.Second))
	if err != nil || len(reports) != 1 || len(reports[0].Spent) != 1 || reports[0].Spent[0].Units != 31 {
		t.Fatalf("Read: %+v, %v; want one report of 31 units", reports, err)
	}
}

// TestSpanForgetsOlderUnits: a record counts the units of its span alone.
func TestSpanForgetsOlderUnits(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	r := newRecorder(t, c, "p")
	units := func(at time.Time) int64 {
		t.Helper()
		reports, err := Read(context.Background(), c, "test:", "s", at)
		if err != nil || len(reports) != 1 {
			t.Fatalf("Read: %+v, %v; want one report", reports, err)
		}
		var n int64
		for _, e := range reports[0].Spent {
			n += e.Units
		}
		return n
	}
	r.Spend("s", "b", "e", "", 100)
	flush(t, r, t0)
	r.Spend("s", "b", "e", "", 20)
	flush(t, r, t0.Add(30*time.Second))
	if got := units(t0.Add(30 * time.Second)); got != 120 {
		t.Errorf("30s in: %d units, want 120", got)
	}
	r.Spend("s", "b", "e", "", 3)
	flush(t, r, t0.Add(60*time.Second)) // the first 100 are a span old
	if got := units(t0.Add(60 * time.Second)); got != 23 {
		t.Errorf("60s in: %d units, want 23", got)
	}
	r.Spend("s", "other", "e", "", 1)
	flush(t, r, t0.Add(120*time.Second)) // the 3 units are a span old
	reports, err := Read(context.Background(), c, "test:", "s", t0.Add(120*time.Second))
	if err != nil || len(reports) != 1 || !reflect.DeepEqual(reports[0].Spent, []Spent{{"other", "e", "", 1}}) {
		t.Fatalf("120s in: %+v, %v; want the bucket other's unit alone", reports, err)
	}
}

// TestStaleProcessDropped: a process that stopped writing stays in the
// reports until its counts have left the span (a minute), its waiting
// requests only until its record's TTL (15s); it drops out of the scope's
// sorted set at a later write of another; Leave takes a process out at
// once.
func TestStaleProcessDropped(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	a := newRecorder(t, c, "a")
	b := newRecorder(t, c, "b")
	a.Spend("s", "b", "e", "", 1)
	w := a.BeginWait("s", "b", "", t0.Add(-time.Second))
	flush(t, a, t0)
	w.End()
	b.Spend("s", "b", "e", "", 2)
	flush(t, b, t0.Add(10*time.Second))
	reports := func(at time.Time) (processes []string, waiting int) {
		t.Helper()
		reports, err := Read(ctx, c, "test:", "s", at)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reports {
			processes = append(processes, r.Process)
			for _, w := range r.Waiting {
				waiting += w.Requests
			}
		}
		return processes, waiting
	}
	if got, waiting := reports(t0.Add(14 * time.Second)); !reflect.DeepEqual(got, []string{"a", "b"}) || waiting != 1 {
		t.Errorf("14s in: %q with %d waiting, want a and b, a's request waiting", got, waiting)
	}
	if got, waiting := reports(t0.Add(15 * time.Second)); !reflect.DeepEqual(got, []string{"a", "b"}) || waiting != 0 {
		t.Errorf("15s in, a's record past its TTL: %q with %d waiting, want a and b (a spent in the span), nothing waiting", got, waiting)
	}
	if got, _ := reports(t0.Add(59 * time.Second)); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("59s in: %q, want a and b", got)
	}
	if got, _ := reports(t0.Add(60 * time.Second)); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("60s in, a's span past: %q, want b alone", got)
	}
	if n := c.ZCard(ctx, "test:{s}:spenders").Val(); n != 2 {
		t.Errorf("the sorted set holds %d processes, want 2: none was pruned yet", n)
	}
	b.Spend("s", "b", "e", "", 2)
	flush(t, b, t0.Add(60*time.Second+grace+time.Millisecond))
	if got := c.ZRange(ctx, "test:{s}:spenders", 0, -1).Val(); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("after b's write, the sorted set holds %q, want b alone: a pruned", got)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := reports(t0.Add(60*time.Second + grace)); len(got) != 0 {
		t.Errorf("after b left: %q, want none", got)
	}
	if n := c.Exists(ctx, "test:{s}:spenders", "test:{s}:spender.b").Val(); n != 0 {
		t.Errorf("after b left, %d of its keys are left", n)
	}
}

// TestCloseWritesWhatWasSpent: a process closes 1s after its last write,
// well within the interval: Close writes what it spent since, and the
// record stays for the span.
func TestCloseWritesWhatWasSpent(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	r := newRecorder(t, c, "cron")
	r.Spend("s", "b", "e", "", 1)
	flush(t, r, t0)
	r.Spend("s", "b", "e", "", 2)
	if err := r.Close(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	reports, err := Read(ctx, c, "test:", "s", t0.Add(50*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || len(reports[0].Spent) != 1 || reports[0].Spent[0].Units != 3 {
		t.Errorf("50s after cron closed: %+v; want its record, 3 units spent", reports)
	}
}

// TestNamesAsKeysSpellThem: a scope's and a process's names are spelled in
// the keys as quota spells scopes: a name of odd characters (a colon, a
// brace) by its hash, and the reader finds the scope by its name or hash.
func TestNamesAsKeysSpellThem(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	const scope, process = "team {a}: search", "web-1:4521"
	r := newRecorder(t, c, process)
	r.Spend(scope, "b", "e", "", 1)
	flush(t, r, t0)
	part, member := keypart.Of(scope), keypart.Of(process)
	if !strings.HasPrefix(part, "#") || !strings.HasPrefix(member, "#") {
		t.Fatalf("keypart.Of kept %q or %q readable", scope, process)
	}
	if n := c.Exists(ctx, "test:{"+part+"}:spenders", "test:{"+part+"}:spender."+member).Val(); n != 2 {
		t.Fatalf("%d of the two keys spelled by keypart.Of exist", n)
	}
	for _, name := range []string{scope, part} {
		reports, err := Read(ctx, c, "test:", name, t0)
		if err != nil || len(reports) != 1 || reports[0].Scope != scope || reports[0].Process != process {
			t.Errorf("Read(%q): %+v, %v; want the scope's report", name, reports, err)
		}
	}
}

// TestLaterFormat: a record of a later version is reported by its
// process and version alone; a record that is no JSON is an error.
func TestLaterFormat(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	live := float64(t0.Add(time.Hour).UnixMilli())
	c.ZAdd(ctx, "test:{s}:spenders", redis.Z{Score: live, Member: "new"})
	c.Set(ctx, "test:{s}:spender.new", `{"v":2,"process":"new/1","scope":"s","units":"a later shape"}`, time.Minute)
	r := newRecorder(t, c, "old")
	r.Spend("s", "b", "e", "", 1)
	flush(t, r, t0)
	reports, err := Read(ctx, c, "test:", "s", t0)
	if err != nil || len(reports) != 2 || !reflect.DeepEqual(reports[0], Report{Process: "new/1", Scope: "s", Format: 2}) || reports[1].Format != 1 {
		t.Fatalf("Read: %+v, %v; want new/1 of format 2, then old", reports, err)
	}
	if sum := Summarize(reports); len(sum) != 1 || sum[0].Units != 1 {
		t.Errorf("Summarize: %+v, want old's unit alone", sum)
	}
	c.Set(ctx, "test:{s}:spender.new", `not json`, time.Minute)
	if _, err := Read(ctx, c, "test:", "s", t0); err == nil || !strings.Contains(err.Error(), "spend: ") {
		t.Errorf("Read of a broken record: %v, want a spend: error", err)
	}
}

// TestRecordText: the record as stored, spelled out.
func TestRecordText(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	r := newRecorder(t, c, "web-3/4521")
	r.Spend("default", "pool", "search.list", "php-cron", 1200)
	r.Refuse("default", "pool", "search.list", "", NoRoom)
	w := r.BeginWait("default", "pool", "", t0.Add(-10*time.Second))
	defer w.End()
	flush(t, r, t0)
	got := c.Get(context.Background(), "test:{default}:spender.web-3/4521").Val()
	want := `{"v":1,"at":1795694400000,"ttl":15000,"span":60000,"process":"web-3/4521","scope":"default",` +
		`"spent":[{"b":"pool","e":"search.list","c":"php-cron","u":1200}],` +
		`"waiting":[{"b":"pool","n":1,"since":1795694390000}],` +
		`"refused":[{"b":"pool","e":"search.list","why":"no-room","n":1}]}`
	if got != want {
		t.Errorf("record\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Error("the record is no JSON")
	}
}

// TestConcurrentCounts: calls from many goroutines while flushes run are
// all counted, once.
func TestConcurrentCounts(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	r, err := New(c, Options{Process: "p", Prefix: "test:", Span: 10000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, calls = 8, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flushed := make(chan time.Time, 1)
	go func() {
		at := t0
		defer func() { flushed <- at }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			at = at.Add(5 * time.Second)
			if err := r.Flush(context.Background(), at); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := []string{"x", "y"}[g%2]
			for range calls {
				w := r.BeginWait("s", "b", caller, t0)
				r.Spend("s", "b", "e", caller, 2)
				r.Refuse("s", "b", "e", caller, NoRoom)
				w.End()
			}
		}()
	}
	wg.Wait()
	close(stop)
	end := (<-flushed).Add(5 * time.Second) // after every flush above, within the span
	flush(t, r, end)
	flush(t, r, end.Add(5*time.Second)) // nothing left to say: keeps the last record
	reports, err := Read(context.Background(), c, "test:", "s", end)
	if err != nil || len(reports) != 1 {
		t.Fatalf("Read: %+v, %v", reports, err)
	}
	var units, refused int64
	for _, e := range reports[0].Spent {
		units += e.Units
	}
	for _, e := range reports[0].Refused {
		refused += e.Requests
	}
	if units != 2*goroutines*calls || refused != goroutines*calls || len(reports[0].Waiting) != 0 {
		t.Errorf("%d units, %d refusals, waiting %+v; want %d, %d, none", units, refused, reports[0].Waiting, 2*goroutines*calls, goroutines*calls)
	}
}

// TestRun: Run writes without being asked, and returns when its context
// ends.
func TestRun(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	r, err := New(c, Options{Process: "p", Prefix: "test:", Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Spend("s", "b", "e", "", 7)
	deadline := time.Now().Add(20 * time.Second)
	for c.Exists(context.Background(), "test:{s}:spender.p").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run wrote no record in 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestNilRecorder: a nil Recorder records nothing and fails nothing.
func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Spend("s", "b", "e", "", 1)
	r.Refuse("s", "b", "e", "", NoRoom)
	r.BeginWait("s", "b", "", t0).End()
	if err := r.Flush(context.Background(), t0); err != nil {
		t.Error(err)
	}
	if err := r.Leave(context.Background()); err != nil {
		t.Error(err)
	}
	r.Run(context.Background())
}

// TestNewRefuses: New refuses what it cannot run with, in one line each.
func TestNewRefuses(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "spend: no process name"},
		{Options{Process: strings.Repeat("p", 257)}, "spend: a process name longer than 256 bytes"},
		{Options{Process: "p", Prefix: "a{b}:"}, "spend: a prefix with a brace"},
		{Options{Process: "p", Interval: time.Microsecond}, "spend: an interval under a millisecond"},
		{Options{Process: "p", Interval: time.Minute, Span: time.Second}, "spend: a span shorter than the interval"},
		{Options{Process: "p", TTL: time.Second}, "spend: a TTL shorter than the interval"},
	} {
		if _, err := New(c, tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): %v, want %q", tc.opts, err, tc.want)
		}
	}
	if _, err := New(nil, Options{Process: "p"}); err == nil || err.Error() != "spend: a nil Redis client" {
		t.Errorf("New(nil): %v", err)
	}
	r, err := New(c, Options{Process: "p"})
	if err != nil || r.interval != DefaultInterval || r.span != DefaultSpan || r.ttl != 3*DefaultInterval || r.prefix != "tollgate:" {
		t.Errorf("New's defaults: %+v, %v", r, err)
	}
	if p := DefaultProcess(); !strings.Contains(p, "/") {
		t.Errorf("DefaultProcess() = %q, want host/pid", p)
	}
}

// TestSeenKeysAllocateNothing: the request's calls for a (scope, bucket,
// endpoint, caller) already seen allocate nothing.
func TestSeenKeysAllocateNothing(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	r := newRecorder(t, c, "p")
	scope, bucket, endpoint, caller := "scope", "bucket", "endpoint", "caller"
	r.Spend(scope, bucket, endpoint, caller, 1)
	r.Refuse(scope, bucket, endpoint, caller, NoRoom)
	r.BeginWait(scope, bucket, caller, t0).End()
	for name, f := range map[string]func(){
		"Spend":         func() { r.Spend(scope, bucket, endpoint, caller, 1) },
		"Refuse":        func() { r.Refuse(scope, bucket, endpoint, caller, NoRoom) },
		"BeginWait+End": func() { r.BeginWait(scope, bucket, caller, t0).End() },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %v times a call, want 0", name, n)
		}
	}
}

// TestFailedWriteIsWrittenAgain: a write that fails (Redis down) keeps its
// counts, and the next Flush writes them, though nothing changed since.
func TestFailedWriteIsWrittenAgain(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	r := newRecorder(t, c, "p")
	r.Spend("s", "b", "e", "", 5)
	s.Kill()
	if err := r.Flush(context.Background(), t0); err == nil || !strings.HasPrefix(err.Error(), "spend: writing 1 of 1 scopes' records: ") {
		t.Fatalf("Flush with Redis down: %v, want a spend: error", err)
	}
	s.Restart(t)
	flush(t, r, t0.Add(5*time.Second))
	reports, err := Read(context.Background(), c, "test:", "s", t0.Add(5*time.Second))
	if err != nil || len(reports) != 1 || !reflect.DeepEqual(reports[0].Spent, []Spent{{"b", "e", "", 5}}) {
		t.Fatalf("Read: %+v, %v; want the 5 units the failed write held", reports, err)
	}
}
