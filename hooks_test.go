package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// The hooks that metrics are built on (package extra/tollgateotel): each
// wait's end, the slots of caps, and the upstream's pauses.

// TestWaitEndFollowsEveryWait: a request whose turn comes and one whose
// caller gives up first each end the wait WaitStarted reported, once.
func TestWaitEndFollowsEveryWait(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	window := 300 * time.Millisecond
	var waits, ends decisions
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, window),
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: time.Minute}, nil),
		Trace:  tollgate.Trace{WaitStarted: waits.hook, WaitEnded: ends.hook}})

	fill(t, lim, tollgate.DefaultScope, 100, 100, window)
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatal(err)
	}
	fill(t, lim, tollgate.DefaultScope, 99, 100, window)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := send(t, tr, ctx, "POST", up.URL+"/v1/upload", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("upload: %v, want the caller's cancellation", err)
	}
	w, e := waits.list(), ends.list()
	if len(w) != 2 || len(e) != 2 {
		t.Fatalf("waits %+v, ends %+v: want two of each", w, e)
	}
	for i, end := range e {
		if end.Endpoint != w[i].Endpoint || !end.At.Equal(w[i].At) || end.Waited <= 0 {
			t.Errorf("end %d = %+v, want the end of wait %+v, with the time it took", i, end, w[i])
		}
	}
	if !e[0].Admitted || e[0].Err != nil || e[0].Endpoint != "items.list" {
		t.Errorf("first end = %+v, want items.list admitted", e[0])
	}
	if e[1].Admitted || !errors.Is(e[1].Err, context.Canceled) || e[1].Endpoint != "upload" {
		t.Errorf("second end = %+v, want the upload not admitted, cancelled", e[1])
	}
}

// slotEvents records the slot hook's calls.
type slotEvents struct {
	mu  sync.Mutex
	all []string
}

func (s *slotEvents) hook(_ context.Context, scope, bucket string, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := "give " + scope + "/" + bucket
	if held {
		ev = "take " + scope + "/" + bucket
	}
	s.all = append(s.all, ev)
}

func (s *slotEvents) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// TestSlotPairs: a slot is reported taken at admission and given back
// when the body is closed, or when the Transport closes with it still held;
// uncapped buckets report nothing.
func TestSlotPairs(t *testing.T) {
	up := newUpstream(t)
	var slots slotEvents
	b := buckets(1000, time.Hour)
	b["search"] = tollgate.Bucket{Limits: b["search"].Limits, MaxInFlight: 2}
	tr, err := tollgate.New(tollgate.Config{Limiter: inProcess(t), Costs: table(t), Buckets: b, Scope: tollgate.Scope("s"), Trace: tollgate.Trace{Slot: slots.hook}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, tr, up.URL+"/v1/search"); err != nil { // read and closed
		t.Fatal(err)
	}
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil { // no cap
		t.Fatal(err)
	}
	want := []string{"take s/search", "give s/search"}
	if got := slots.list(); !slices.Equal(got, want) {
		t.Errorf("after two requests: %q, want %q", got, want)
	}
	req, _ := http.NewRequest("GET", up.URL+"/v1/search", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // after Close: nothing more to report
	want = append(want, "take s/search")
	if got := slots.list(); !slices.Equal(got, want) {
		t.Errorf("with a body open: %q, want %q", got, want)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want = append(want, "give s/search")
	if got := slots.list(); !slices.Equal(got, want) {
		t.Errorf("after Close: %q, want %q", got, want)
	}
}

// pauses records the pause hook's calls.
type pauses struct {
	mu  sync.Mutex
	all []tollgate.UpstreamPause
}

func (p *pauses) hook(_ context.Context, ev tollgate.UpstreamPause) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = append(p.all, ev)
}

func (p *pauses) list() []tollgate.UpstreamPause {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.all)
}

// TestPausedNamesTheReason: a 429 is reported with its status as the
// reason; a reader's own reason and buckets are passed on.
func TestPausedNamesTheReason(t *testing.T) {
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/search" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	var seen pauses
	tr := newTransport(t, tollgate.Config{
		Limiter: inProcess(t), Costs: table(t), Buckets: buckets(1000, time.Hour), Scope: tollgate.Scope("s"),
		ReadResponse: func(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
			if resp.StatusCode == http.StatusForbidden {
				return tollgate.Verdict{Spent: true, Buckets: []string{"search"}, Pause: time.Minute, Reason: "searchSpent"}
			}
			return tollgate.DefaultUpstream(resp, e)
		},
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Paused: seen.hook},
	})
	get(t, tr, up.URL+"/v1/search")
	get(t, tr, up.URL+"/v1/items")
	got := seen.list()
	want := []tollgate.UpstreamPause{
		{Endpoint: "search.list", Scope: "s", Buckets: []string{"search"}, For: time.Minute, Reason: "searchSpent"},
		{Endpoint: "items.list", Scope: "s", For: 30 * time.Second, Reason: "429"},
	}
	if len(got) != len(want) {
		t.Fatalf("Paused saw %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Endpoint != want[i].Endpoint || got[i].Scope != want[i].Scope || got[i].For != want[i].For ||
			got[i].Reason != want[i].Reason || !slices.Equal(got[i].Buckets, want[i].Buckets) {
			t.Errorf("pause %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
