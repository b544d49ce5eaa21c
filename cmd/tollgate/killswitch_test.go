package main

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// outcome is one request of the live worker: when it started, and whether
// it was sent.
type outcome struct {
	start time.Time
	sent  bool
	err   error
}

// worker sends requests one after the other until stopped, recording each.
type worker struct {
	mu       sync.Mutex
	outcomes []outcome
	stop     chan struct{}
	done     chan struct{}
}

func (e *env) startWorker(t *testing.T, tr *tollgate.Transport, project, path string) *worker {
	w := &worker{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for range 100000 { // bounded: at 1ms a request, well over the test
			select {
			case <-w.stop:
				return
			default:
			}
			o := outcome{start: time.Now()}
			resp, err := e.get(tr, project, path)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				o.sent = true
			}
			o.err = err
			w.mu.Lock()
			w.outcomes = append(w.outcomes, o)
			w.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

// since returns the outcomes of the requests started after t.
func (w *worker) since(t time.Time) []outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []outcome
	for _, o := range w.outcomes {
		if o.start.After(t) {
			out = append(out, o)
		}
	}
	return out
}

// await waits, ten seconds at most, until the requests started after t
// satisfy ok.
func (w *worker) await(t *testing.T, after time.Time, what string, ok func([]outcome) bool) []outcome {
	t.Helper()
	for range 1000 {
		if got := w.since(after); ok(got) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("after 10s, still waiting for %s", what)
	return nil
}

func tally(os []outcome, sent bool) int {
	n := 0
	for _, o := range os {
		if o.sent == sent {
			n++
		}
	}
	return n
}

// TestPauseStopsALiveWorker: a process runs two workers that fail fast.
// One spends from leases of 1,000 units, asking Redis nothing between
// them; the other decides call by call and remembers refusals, so as not
// to ask Redis again before they end. tollgate pause returns once the
// process has applied it, and from then on at most the request each
// worker had already decided reaches the upstream. tollgate resume clears
// the refusals the process remembers: each worker's first request after
// it is sent, though the pause had most of a minute to run.
func TestPauseStopsALiveWorker(t *testing.T) {
	e := newEnv(t)
	tr := e.process(t, e.limiter(t, nil), func(cfg *tollgate.Config) {
		la := pacific(t)
		cfg.Buckets = map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerDay(10_000_000, la)}},
			"search": {Limits: []quota.Limit{quota.PerDay(1_000_000, la)}},
		}
		cfg.Lease = func(string, string) (int64, time.Duration) { return 1000, time.Minute }
		cfg.Policy = func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} }
	})
	start := time.Now()
	workers := []*worker{
		e.startWorker(t, tr, "live", "/v1/items"),  // one charge: from leases
		e.startWorker(t, tr, "live", "/v1/search"), // two: call by call
	}
	for _, w := range workers {
		w.await(t, start, "20 requests sent", func(os []outcome) bool { return tally(os, true) >= 20 })
	}

	code, out, errs := cmd(t, nil, "pause", "-scope", "live", "-for", "1m", "-reason", "incident 42", "-redis", e.url)
	paused := time.Now()
	arrived := e.arrived.Load()
	if code != 0 || errs != "" || !strings.Contains(out, "the 1 process listening applied it") {
		t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, w := range workers {
		after := w.await(t, paused, "5 requests refused", func(os []outcome) bool { return tally(os, false) >= 5 })
		for _, o := range after {
			var qe *tollgate.QuotaError
			if !o.sent && (!errors.As(o.err, &qe) || qe.Cause != tollgate.PausedByOperator || qe.Reason != "incident 42" || qe.RetryAfter < 50*time.Second) {
				t.Errorf("a request refused during the pause: %v; want a QuotaError of a pause ending in about a minute", o.err)
				break
			}
		}
	}
	if late := e.arrived.Load() - arrived; late > int64(len(workers)) {
		t.Errorf("%d requests reached the upstream after the pause returned, want at most the %d already decided", late, len(workers))
	}

	code, out, errs = cmd(t, nil, "resume", "-scope", "live", "-redis", e.url)
	resumed := time.Now()
	if code != 0 || errs != "" || !strings.Contains(out, "resumed scope \"live\": 1 pause lifted") {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for i, w := range workers {
		got := w.await(t, resumed, "a request after the resume", func(os []outcome) bool { return len(os) > 0 })
		if !got[0].sent {
			t.Errorf("worker %d's first request after the resume: %v; want it sent", i, got[0].err)
		}
	}
}
