package tollgate_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// The kill switch and the requests that wait: a pause, an operator's or
// an upstream's, told while requests of several processes wait for their
// turn or for a cap's slot, stops them all. Each "process" here is a
// Transport on a limiter of its own client (its own subscription), all on
// one real redis-server.

// killRig is the processes, their workers and the upstream they share.
type killRig struct {
	redis *redistest.Server
	up    *upstream
	trs   []*tollgate.Transport

	mu   sync.Mutex
	errs []error // what the workers' last requests returned
	wg   sync.WaitGroup
}

func newKillRig(t *testing.T, processes int, cfg func(*tollgate.Config)) *killRig {
	t.Helper()
	s := redistest.Start(t)
	r := &killRig{redis: s, up: newUpstream(t)}
	for range processes {
		c := tollgate.Config{
			Transit: -1, Limiter: limiterOn(t, r.client(t)), Costs: table(t), Buckets: buckets(20, 2*time.Second),
			Policy: tollgate.Policies(tollgate.Policy{MaxWait: 30 * time.Second}, nil),
		}
		if cfg != nil {
			cfg(&c)
		}
		r.trs = append(r.trs, newTransport(t, c))
	}
	return r
}

// client is a new client of the rig's Redis: a process of its own.
func (r *killRig) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.redis.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// work starts n workers on each process, each sending GETs of path one
// after the other until one fails (or ctx ends), and keeping that error.
func (r *killRig) work(t *testing.T, ctx context.Context, n int, path string) {
	for _, tr := range r.trs {
		for range n {
			r.wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", r.up.URL+path, nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						r.mu.Lock()
						r.errs = append(r.errs, err)
						r.mu.Unlock()
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	t.Cleanup(r.wg.Wait)
}

// after counts the arrivals at the upstream, on path, from instant on.
func (r *killRig) after(from time.Time, path string) int {
	r.up.mu.Lock()
	defer r.up.mu.Unlock()
	n := 0
	for _, a := range r.up.arrivals {
		if !a.at.Before(from) && a.path == path {
			n++
		}
	}
	return n
}

// held is the pool units held for waiting requests, as status reads them.
func (r *killRig) held(t *testing.T) int64 {
	t.Helper()
	u, err := r.trs[0].Usage(context.Background(), tollgate.DefaultScope, "pool")
	if err != nil {
		t.Fatal(err)
	}
	return u[0].Held
}

// await polls cond every 20ms for at most limit, and fails the test when
// it does not hold by then.
func await(t *testing.T, limit time.Duration, what string, cond func() bool) bool {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); {
		if time.Now().After(end) {
			t.Errorf("%s: not within %v", what, limit)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// stopped is how many workers have stopped.
func (r *killRig) stopped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

// operatorPause pauses the default scope as tollgate pause does, from a
// process of its own, and returns how far the notice went.
func (r *killRig) operatorPause(t *testing.T, d time.Duration, reason string) ops.Reach {
	t.Helper()
	op := limiterOn(t, r.client(t))
	reach, err := ops.New(op).Confirm(context.Background(), 5*time.Second, func(ctx context.Context) error {
		_, err := op.PauseBecause(ctx, tollgate.DefaultScope, "", d, reason)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return reach
}

// TestOperatorPauseStopsWaitingRequests is the scenario: two
// processes with workers waiting for their turn (the window full, holds
// in Redis), an operator pauses the scope for two minutes. Both processes
// acknowledge; from a second after the pause returns nothing more arrives
// upstream; every worker is refused with the operator's reason, at once
// (the pause ends after their MaxWait); no unit is held for them.
func TestOperatorPauseStopsWaitingRequests(t *testing.T) {
	r := newKillRig(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.work(t, ctx, 6, "/v1/items")
	if !await(t, 10*time.Second, "holds waiting in Redis", func() bool { return r.held(t) >= 4 }) {
		t.FailNow()
	}

	reach := r.operatorPause(t, 2*time.Minute, "incident 7")
	paused := time.Now()
	if reach.Listening < 2 || reach.Applied != reach.Listening {
		t.Errorf("pause reached %+v; want both processes with waiting requests listening, each applying it", reach)
	}
	if h := r.held(t); h != 0 {
		t.Errorf("%d units still held for waiting requests once the pause returned, want 0", h)
	}
	if await(t, 2*time.Second, "every worker stopped", func() bool { return r.stopped() == 12 }) {
		if refused := time.Since(paused); refused > time.Second {
			t.Errorf("the last worker was refused %v after the pause, want at once", refused)
		}
	}
	time.Sleep(paused.Add(3 * time.Second).Sub(time.Now())) // past the turns the holds had: a window and more
	cancel()
	r.wg.Wait()
	if n := r.after(paused.Add(time.Second), "/v1/items"); n != 0 {
		t.Errorf("%d requests arrived upstream from 1s after the pause on, want none", n)
	}
	for _, err := range r.errs {
		var qe *tollgate.QuotaError
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByOperator || qe.Reason != "incident 7" || qe.RetryAfter < 110*time.Second {
			t.Errorf("a worker stopped with %v; want refused for the operator's pause, reason \"incident 7\", retry after about 2m", err)
		}
	}
	if h := r.held(t); h != 0 {
		t.Errorf("%d units held during the pause, want 0", h)
	}
}

// TestUpstreamPauseStopsOtherProcessesWaitingRequests: a third process's
// request meets a 429 (Retry-After 4s). The requests the two others have
// waiting are dated after the pause: nothing arrives from a second after
// the 429 until the pause ends, then they go on, none refused.
func TestUpstreamPauseStopsOtherProcessesWaitingRequests(t *testing.T) {
	r := newKillRig(t, 3, nil)
	r.up.setRespond(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/limited" {
			w.Header().Set("Retry-After", "4")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
	waiting := &killRig{redis: r.redis, up: r.up, trs: r.trs[:2]}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting.work(t, ctx, 6, "/v1/items")
	if !await(t, 10*time.Second, "holds waiting in Redis", func() bool { return r.held(t) >= 4 }) {
		t.FailNow()
	}

	table, err := costs.New(costs.Spec{Buckets: []string{"pool", "search"}, Rules: []costs.Rule{
		{Pattern: "GET /v1/limited", Endpoint: "limited", Charges: []costs.Charge{{Bucket: "search", Units: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	third := newTransport(t, tollgate.Config{Transit: -1, Limiter: limiterOn(t, r.client(t)), Costs: table, Buckets: buckets(20, 2*time.Second)})
	_, err = get(t, third, r.up.URL+"/v1/limited")
	hit := time.Now()
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || !strings.Contains(qe.Reason, "429") {
		t.Fatalf("the 429: %v; want refused for the upstream's pause", err)
	}
	time.Sleep(3500 * time.Millisecond) // within the pause's 4s
	if n := r.after(hit.Add(time.Second), "/v1/items"); n != 0 {
		t.Errorf("%d waiting requests arrived upstream from 1s after another process's 429 on, within its pause; want none", n)
	}
	await(t, 5*time.Second, "the workers going on after the pause", func() bool { return r.after(hit.Add(4*time.Second), "/v1/items") >= 10 })
	cancel()
	waiting.wg.Wait()
	for _, err := range waiting.errs {
		var qe *tollgate.QuotaError
		if errors.As(err, &qe) {
			t.Errorf("a waiting request was refused: %v; want it dated after the pause, its MaxWait being longer", err)
		}
	}
}

// TestPauseStopsSlotWaiters: requests wait for a slot of a cap (two in
// flight, each answer taking 2s), paid ones and free ones. An operator's
// pause refuses them at once with its reason, though the requests in
// flight still hold their slots; nothing more arrives once those end.
func TestPauseStopsSlotWaiters(t *testing.T) {
	tab, err := costs.New(costs.Spec{Buckets: []string{"pool", "search"}, Rules: []costs.Rule{
		{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		{Pattern: "GET /v1/status", Endpoint: "status", Free: true, Charges: []costs.Charge{{Bucket: "pool"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := newKillRig(t, 2, func(cfg *tollgate.Config) {
		cfg.Costs = tab
		cfg.Buckets = map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerWindow(1000, time.Hour)}, MaxInFlight: 2},
			"search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}},
		}
	})
	release := make(chan struct{})
	r.up.setRespond(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-time.After(2 * time.Second):
		}
		io.WriteString(w, "ok")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.work(t, ctx, 3, "/v1/items")
	r.work(t, ctx, 3, "/v1/status")
	if !await(t, 5*time.Second, "two requests in flight", func() bool { return r.after(time.Time{}, "/v1/items")+r.after(time.Time{}, "/v1/status") >= 2 }) {
		t.FailNow()
	}
	time.Sleep(200 * time.Millisecond) // the others queue for the slots

	reach := r.operatorPause(t, 2*time.Minute, "slots incident")
	paused := time.Now()
	if reach.Listening < 2 || reach.Applied != reach.Listening {
		t.Errorf("pause reached %+v; want both processes with requests waiting for slots listening, each applying it", reach)
	}
	await(t, 1500*time.Millisecond, "every waiting request refused, before the slots in flight end", func() bool { return r.stopped() >= 10 })
	close(release)
	time.Sleep(2 * time.Second)
	if n := r.after(paused.Add(time.Second), "/v1/items") + r.after(paused.Add(time.Second), "/v1/status"); n != 0 {
		t.Errorf("%d requests arrived upstream from 1s after the pause on, want none", n)
	}
	cancel()
	r.wg.Wait()
	for _, err := range r.errs {
		var qe *tollgate.QuotaError
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByOperator || qe.Reason != "slots incident" {
			t.Errorf("a request waiting for a slot ended with %v; want refused for the operator's pause", err)
		}
	}
}

// TestDeafWaiterReadsThePauseBeforeSending: a process that cannot listen
// (its Redis user may not subscribe) has requests waiting when an
// operator pauses the scope. When their turns come, each reads the pause
// in Redis before it is sent: none is, and each is refused with the
// operator's reason.
func TestDeafWaiterReadsThePauseBeforeSending(t *testing.T) {
	s := redistest.Start(t)
	s.SetUser(t, "deaf", "on", ">deaf-password", "~*", "+@all", "resetchannels")
	r := &killRig{redis: s, up: newUpstream(t)}
	r.trs = append(r.trs, newTransport(t, tollgate.Config{
		Transit: -1, Limiter: limiterOn(t, s.UserClient(t, "deaf", "deaf-password")), Costs: table(t), Buckets: buckets(20, 2*time.Second),
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: 30 * time.Second}, nil),
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.work(t, ctx, 6, "/v1/items")
	if !await(t, 10*time.Second, "holds waiting in Redis", func() bool { return r.held(t) >= 4 }) {
		t.FailNow()
	}
	reach := r.operatorPause(t, 2*time.Minute, "deaf incident")
	paused := time.Now()
	if reach.Listening != 0 {
		t.Fatalf("pause reached %+v; the process may not subscribe, so want none listening", reach)
	}
	await(t, 4*time.Second, "every worker stopped", func() bool { return r.stopped() == 6 })
	cancel()
	r.wg.Wait()
	if n := r.after(paused.Add(100*time.Millisecond), "/v1/items"); n != 0 {
		t.Errorf("%d requests arrived upstream after the pause, want none", n)
	}
	for _, err := range r.errs {
		var qe *tollgate.QuotaError
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByOperator || qe.Reason != "deaf incident" {
			t.Errorf("a worker stopped with %v; want refused for the operator's pause", err)
		}
	}
	if h := r.held(t); h != 0 {
		t.Errorf("%d units held during the pause, want 0", h)
	}
}
