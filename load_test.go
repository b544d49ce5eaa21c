package tollgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/quota"
)

// The many-process load test: the test binary runs itself as worker
// processes, which spend one scope through a tollgate.Transport on a real
// Redis against an upstream in the parent that meters every arrival.

// loadChildEnv carries a child's configuration (JSON); its presence makes
// the test binary a worker process.
const loadChildEnv = "TOLLGATE_LOAD_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(loadChildEnv); cfg != "" {
		os.Exit(loadChild(cfg))
	}
	if cfg := os.Getenv(capChildEnv); cfg != "" {
		os.Exit(capChild(cfg))
	}
	if cfg := os.Getenv(announcedChildEnv); cfg != "" {
		os.Exit(announcedChild(cfg))
	}
	if cfg := os.Getenv(spendChildEnv); cfg != "" {
		os.Exit(spendChild(cfg))
	}
	if cfg := os.Getenv(regionChildEnv); cfg != "" {
		os.Exit(regionChild(cfg))
	}
	os.Exit(m.Run())
}

// loadConfig is what a worker process is told.
type loadConfig struct {
	Redis    []string // one address, or several for a cluster
	Cluster  bool
	Upstream string
	Policy   string // "wait" or "error"
	Lease    bool   // spend from leases
	Units    int64  // the limit, per Window
	Window   time.Duration
	Transit  time.Duration
	Start    time.Time // every process starts spending at this instant
	Duration time.Duration
	Workers  int
	Process  int
}

// loadReport is what a worker process prints: each worker's counts, each
// call's instants, and when the process was ready to spend.
type loadReport struct {
	Workers []workerResult
	Calls   []callRecord
	Ready   time.Time // its Transport built, its workers about to start
	First   time.Time // its first call asked
}

// callRecord is one call's instants, for the parent's measures: when it
// was asked, when it was admitted (the limiter's clock), and when it began
// and ended waiting for its turn or for a refusal's RetryAfter (zero when
// it did neither).
type callRecord struct {
	Units              int64
	Asked, Admitted    time.Time
	WaitFrom, WaitTill time.Time `json:",omitzero"`
	GivenBack          bool      `json:",omitempty"` // a turn given back: Admitted is its instant
}

// workerResult is what one worker goroutine did.
type workerResult struct {
	Process, Worker int
	Cost            int64
	Admitted        int    // requests the upstream answered 200
	Leased          int    // of those, spent from a lease with no round trip
	Refused         int    // *QuotaError from tollgate
	Failed          int    // anything else
	FirstErr        string `json:",omitempty"`
}

// loadTable charges /cheap 1 unit and /dear 100 units of the pool.
func loadTable() (*costs.Table, error) {
	return costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /cheap", Endpoint: "cheap", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			{Pattern: "GET /dear", Endpoint: "dear", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
		},
	})
}

// workerCost gives one worker in five the 100-unit calls.
func workerCost(worker int) int64 {
	if worker%5 == 0 {
		return 100
	}
	return 1
}

// loadChild is a worker process: it spends the scope from cfg.Workers
// goroutines until cfg.Duration has passed and prints their results as JSON.
func loadChild(raw string) int {
	var cfg loadConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "load child:", err)
		return 3
	}
	var rdb redis.UniversalClient
	if cfg.Cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Redis, PoolSize: cfg.Workers})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: cfg.Redis[0], PoolSize: cfg.Workers})
	}
	defer rdb.Close()
	table, err := loadTable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load child:", err)
		return 3
	}
	// A waiter may wait for the whole queue: every worker of every process
	// holding one turn, a few windows deep.
	pol := tollgate.Policy{OnRefusal: tollgate.WaitTurn, MaxWait: 6 * cfg.Window}
	if cfg.Policy == "error" {
		pol.OnRefusal = tollgate.Refuse
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Workers // keep a connection per worker, as a busy client would
	lim, err := quota.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load child:", err)
		return 3
	}
	tcfg := tollgate.Config{
		Transit: cfg.Transit,
		Base:    stampSent{base},
		Limiter: lim,
		Costs:   table,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(cfg.Units, cfg.Window)}}},
		Scope:   tollgate.Scope("load"),
		Policy:  tollgate.Policies(pol, nil),
		Trace:   tollgate.Trace{Decided: recordAdmission, WaitEnded: recordWait},
	}
	if cfg.Lease {
		// Blocks of 1/40 of the limit, for a twentieth of the window.
		tcfg.Lease = func(string, string) (int64, time.Duration) {
			return cfg.Units / 40, cfg.Window / 20
		}
	}
	tr, err := tollgate.New(tcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load child:", err)
		return 3
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	// Processes boot at different speeds (the race detector, a loaded
	// machine): all start spending at one instant, so that none finds the
	// queue already full of the others' holds and starves for it.
	report := loadReport{Ready: time.Now()}
	time.Sleep(time.Until(cfg.Start))
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Start.Add(cfg.Duration))
	defer cancel()
	results := make([]workerResult, cfg.Workers)
	calls := make([][]callRecord, cfg.Workers)
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() {
			res := &results[w]
			res.Process, res.Worker, res.Cost = cfg.Process, w, workerCost(w)
			path := "/cheap"
			if res.Cost == 100 {
				path = "/dear"
			}
			for i := 0; i < 100000 && ctx.Err() == nil; i++ {
				adm := new(admission)
				rctx := context.WithValue(ctx, admissionKey{}, adm)
				req, _ := http.NewRequestWithContext(rctx, "GET", cfg.Upstream+path, nil)
				asked := time.Now()
				resp, err := client.Do(req)
				for _, at := range adm.givenBack {
					calls[w] = append(calls[w], callRecord{Units: res.Cost, Admitted: at, GivenBack: true})
				}
				var qe *tollgate.QuotaError
				switch {
				case err == nil:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						res.Admitted++
						if adm.leased {
							res.Leased++
						}
						calls[w] = append(calls[w], callRecord{Units: res.Cost, Asked: asked, Admitted: adm.at, WaitFrom: adm.waitFrom, WaitTill: adm.waitTill})
					} else {
						res.Failed++
						res.FirstErr = cmp(res.FirstErr, resp.Status)
					}
				case ctx.Err() != nil:
					return // the run is over
				case errors.As(err, &qe):
					res.Refused++
					// A caller that may not wait comes back when told: it
					// waits, as a waiting one would, from the refusal on.
					refused := time.Now()
					select {
					case <-time.After(max(qe.RetryAfter, time.Millisecond)):
						calls[w] = append(calls[w], callRecord{Units: res.Cost, Asked: asked, WaitFrom: refused, WaitTill: refused.Add(qe.RetryAfter)})
					case <-ctx.Done():
					}
				default:
					res.Failed++
					res.FirstErr = cmp(res.FirstErr, err.Error())
				}
			}
		})
	}
	wg.Wait()
	report.Workers = results
	for _, c := range calls {
		for _, r := range c {
			if !r.Asked.IsZero() && (report.First.IsZero() || r.Asked.Before(report.First)) {
				report.First = r.Asked
			}
		}
		report.Calls = append(report.Calls, c...)
	}
	if err := json.NewEncoder(os.Stdout).Encode(report); err != nil {
		return 3
	}
	return 0
}

// stampSent marks each request with its admission instant and the instant
// it leaves the Transport, so that the upstream can measure the trip.
type stampSent struct{ base http.RoundTripper }

type admissionKey struct{}

// admission is what the decision hooks tell of a request.
type admission struct {
	at                 time.Time
	leased             bool
	waitFrom, waitTill time.Time   // its wait for a turn, if it waited
	givenBack          []time.Time // the turns it gave back, decided again
}

func (s stampSent) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header.Set("X-Sent", time.Now().Format(time.RFC3339Nano))
	if a, ok := req.Context().Value(admissionKey{}).(*admission); ok {
		req.Header.Set("X-Admitted", a.at.Format(time.RFC3339Nano))
	}
	return s.base.RoundTrip(req)
}

// recordAdmission is the decision hook: it leaves the admission instant
// where stampSent finds it.
func recordAdmission(ctx context.Context, d tollgate.Decision) {
	if a, ok := ctx.Value(admissionKey{}).(*admission); ok {
		if !a.at.IsZero() {
			// Decided again: handed off later than Transit after its
			// admission, it gave its turn back.
			a.givenBack = append(a.givenBack, a.at)
		}
		a.at, a.leased = d.At, d.Leased
	}
}

// recordWait is the hook at a wait's end: it notes when the request
// waited, on the local clock (the limiter's, on this one machine).
func recordWait(ctx context.Context, d tollgate.Decision) {
	if a, ok := ctx.Value(admissionKey{}).(*admission); ok && d.Err == nil {
		a.waitTill = time.Now()
		a.waitFrom = a.waitTill.Add(-d.Waited)
	}
}

// cmp keeps the first non-empty string.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// meter is the parent's upstream: it records every arrival, with the
// instants the worker stamped on it. It refuses nothing: whether a real
// upstream would have is what runLoad checks, from the arrivals.
type meter struct {
	*httptest.Server

	mu       sync.Mutex
	arrivals []admitted
}

type admitted struct {
	at, sent, admitted time.Time
	cost               int64
}

func newMeter(t *testing.T) *meter {
	m := &meter{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		sent, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Sent"))
		adm, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Admitted"))
		cost := int64(1)
		if r.URL.Path == "/dear" {
			cost = 100
		}
		m.mu.Lock()
		m.arrivals = append(m.arrivals, admitted{now, sent, adm, cost})
		m.mu.Unlock()
	}))
	t.Cleanup(m.Close)
	return m
}

// loadRun is one many-process run and what its checks measured.
type loadRun struct {
	calls, units, most int64
	fill               windowcheck.Fill // the limiter's window while callers waited
}

// runLoad starts procs worker processes against rdbAddrs and checks what
// tollgate promises, on measures the machine cannot bend:
//
//   - no window of the limiter's clock admitted over the limit (exact);
//   - no window at the upstream over the limit, the window shortened by
//     the slowest trip from admission to arrival the run measured (a call
//     can only arrive later than it was admitted, and no later than that);
//   - whenever a caller waited for its turn (or, refused, for its
//     RetryAfter), the window was full: tollgate left no units unspent
//     that a waiting caller could have had;
//   - no worker starved.
//
// How much of the run's span the upstream's quota was used is logged, not
// checked: it counts the machine's speed too (processes that boot late,
// workers descheduled between calls, a run that ends mid-window).
func runLoad(t *testing.T, rdbAddrs []string, cluster bool, policy string, lease bool) loadRun {
	t.Helper()
	const procs, workers = 4, 50
	const units = int64(6000)
	window := time.Second
	duration := 4 * time.Second
	// Four processes of 50 goroutines, a cluster and the race detector
	// on a small machine can send a request 200ms after its admission.
	// The transit guard covers that, as it would on a loaded host.
	transit := 200 * time.Millisecond
	up := newMeter(t)

	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	start := time.Now().Add(2 * time.Second) // time enough for every process to boot
	for p := range procs {
		cfg, _ := json.Marshal(loadConfig{
			Redis: rdbAddrs, Cluster: cluster, Upstream: up.URL, Policy: policy, Lease: lease,
			Units: units, Window: window, Transit: transit, Start: start, Duration: duration, Workers: workers, Process: p,
		})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), loadChildEnv+"="+string(cfg))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	var results []workerResult
	var calls []callRecord
	var late []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker process %d: %v", i, err)
		}
		var rep loadReport
		if err := json.Unmarshal(outs[i].Bytes(), &rep); err != nil {
			t.Fatalf("worker process %d printed %q: %v", i, outs[i].String(), err)
		}
		results, calls = append(results, rep.Workers...), append(calls, rep.Calls...)
		late = append(late, fmt.Sprintf("%d: ready %v, first call %v", i, rep.Ready.Sub(start).Round(time.Millisecond), rep.First.Sub(start).Round(time.Millisecond)))
	}
	t.Logf("processes against the start: %s", strings.Join(late, "; "))

	up.mu.Lock()
	arrivals := slices.Clone(up.arrivals)
	up.mu.Unlock()
	var run loadRun
	run.most = checkArrivals(t, arrivals, units, window, transit)

	// The admissions, on the limiter's clock: exact.
	decided := make([]windowcheck.Call, len(arrivals))
	for i, a := range arrivals {
		run.calls++
		run.units += a.cost
		decided[i] = windowcheck.Call{At: a.admitted, Units: a.cost}
	}
	if mostAdmitted, _ := windowcheck.Most(decided, window+transit); mostAdmitted > units {
		t.Errorf("%d units were admitted within one window of %v, over the limit of %d", mostAdmitted, window, units)
	}

	// The window while callers waited. A waiting caller's turn is the
	// earliest instant its units fit behind the turns before it, so the
	// window stays within the largest cost of the limit until then: full.
	// The limiter sums the calls of a slice of its window (a thousandth,
	// no finer than a millisecond) into one entry dated at the latest of
	// them, so a call counts for up to a slice longer than the window:
	// the window measured here is one slice longer. A turn given back
	// (a call handed off later than Transit, and decided again) leaves
	// its window short when the turns after it were dated already: the
	// machine, not the limiter, lost those units, and the windows that
	// hold such a turn are left out (the log says how many there were).
	// Leases take their blocks whole and spend them later, so a leasing
	// process's window looks emptier by its blocks' unspent part.
	slice := max((window+transit)/1000, time.Millisecond)
	var waits, givenBack []windowcheck.Span
	for _, c := range calls {
		if c.GivenBack {
			givenBack = append(givenBack, windowcheck.Span{From: c.Admitted, Till: c.Admitted.Add(window + transit + slice)})
			continue
		}
		till := c.WaitTill
		if !c.Admitted.IsZero() && c.Admitted.Before(till) {
			till = c.Admitted // it waited for its turn, not for its goroutine to wake
		}
		if !c.WaitFrom.IsZero() && till.After(c.WaitFrom) {
			waits = append(waits, windowcheck.Span{From: c.WaitFrom, Till: till})
		}
	}
	// The run's last moments are left out: a turn due just before its
	// caller's deadline can be given back for it, leaving its window short.
	end := start.Add(duration - transit)
	waits = windowcheck.Minus(windowcheck.Before(waits, end), givenBack)
	run.fill = windowcheck.Filled(decided, window+transit+slice, time.Millisecond, waits)
	full := units - 100 + 1 // within the largest cost, a 100-unit call's
	wantShare := 0.98
	if lease {
		wantShare = 0.9
	}
	switch {
	case run.fill.Instants == 0:
		t.Errorf("no caller waited: the run never reached its limit")
	case policy == "wait" && !lease && run.fill.Least < full:
		t.Errorf("while callers waited, the window held %d units at %v, under %d: units were left unspent",
			run.fill.Least, run.fill.LeastAt.Sub(start).Round(time.Millisecond), full)
	case float64(run.fill.Mean) < wantShare*float64(units):
		t.Errorf("while callers waited, the window held %.0f units on average, under %.0f%% of the limit of %d",
			run.fill.Mean, 100*wantShare, units)
	}

	// What the upstream's quota allowed over the run's span, for the log:
	// a full window at its start, and one more each window and transit.
	var used float64
	if n := len(arrivals); n > 1 {
		span := arrivals[n-1].at.Sub(arrivals[0].at)
		windows := int64(span/(window+transit)) + 1
		used = float64(run.units) / float64(windows*units)
	}
	byCost := map[int64][]int{}
	leased := 0
	for _, r := range results {
		leased += r.Leased
		if r.Failed > 0 {
			t.Errorf("process %d worker %d: %d failures, first: %s", r.Process, r.Worker, r.Failed, r.FirstErr)
		}
		byCost[r.Cost] = append(byCost[r.Cost], r.Admitted)
	}
	for cost, admitted := range byCost {
		total := 0
		for _, n := range admitted {
			total += n
		}
		mean := float64(total) / float64(len(admitted))
		least := slices.Min(admitted)
		t.Logf("%s: %d-unit workers: %d calls, %.1f each on average, the least served %d", policy, cost, total, mean, least)
		// First come, first served: a waiting worker gets its turns. The
		// counts are small (a 1-unit worker is served about 6 times in
		// the run), and the first window's burst, the run's end and a
		// worker process descheduled for a moment on a loaded machine
		// each move a count by one or two: a worker served under a
		// quarter of the mean starved, one served a third did not
		// necessarily.
		if policy == "wait" && float64(least) < mean/4 {
			t.Errorf("a %d-unit worker was served %d times against a mean of %.1f: it starved", cost, least, mean)
		}
		if least == 0 && (policy == "wait" || cost == 1) {
			t.Errorf("a %d-unit worker was never served", cost)
		}
	}
	// At the limit, waiters queue and leases wait behind them (a lease
	// does not jump the queue), so only part of the calls go by lease.
	if lease && leased < int(run.calls)/10 {
		t.Errorf("only %d of %d calls were spent from leases", leased, run.calls)
	}
	t.Logf("%s (lease %v): %d calls (%d from leases), %d units arrived; at most %d units in a window of %v (limit %d); "+
		"while callers waited the window held %.0f units on average, %d at least (%d instants), %d turns given back by calls handed off late; "+
		"the upstream got %.1f%% of what its quota allowed over the run's span",
		policy, lease, run.calls, leased, run.units, run.most, window, units,
		run.fill.Mean, run.fill.Least, run.fill.Instants, len(givenBack), 100*used)
	return run
}

// checkArrivals checks the arrivals at the upstream against the limit of
// units per window, for calls admitted under transit. A call arrives
// after its admission, and at most the slowest trip the run measured
// after it: so the arrivals within any window of window+transit less
// that trip were admitted within one window of window+transit, which the
// limiter holds to the limit. It returns the most units that arrived in
// such a window.
func checkArrivals(t *testing.T, arrivals []admitted, units int64, window, transit time.Duration) int64 {
	t.Helper()
	var slowest, latest time.Duration // admission to arrival; admission to send
	calls := make([]windowcheck.Call, len(arrivals))
	for i, a := range arrivals {
		if a.admitted.IsZero() {
			t.Fatalf("a call arrived with no admission instant")
		}
		slowest = max(slowest, a.at.Sub(a.admitted))
		latest = max(latest, a.sent.Sub(a.admitted))
		calls[i] = windowcheck.Call{At: a.at, Units: a.cost}
	}
	checked := window + transit - slowest
	if checked <= 0 {
		t.Fatalf("a call arrived %v after its admission (sent %v after it at the latest): the machine held it so long that the upstream's windows cannot be checked",
			slowest.Round(time.Millisecond), latest.Round(time.Millisecond))
	}
	most, end := windowcheck.Most(calls, checked)
	if most > units {
		t.Errorf("%d units arrived within the %v ending %v, over the limit of %d; the slowest trip from admission to arrival took %v, the latest send %v after its admission",
			most, checked.Round(time.Millisecond), end.Format(time.StampMilli), units, slowest.Round(time.Millisecond), latest.Round(time.Millisecond))
	}
	t.Logf("arrivals checked in windows of %v: the slowest trip from admission to arrival took %v, the latest send %v after its admission",
		checked.Round(time.Millisecond), slowest.Round(time.Millisecond), latest.Round(time.Millisecond))
	return most
}

func TestManyProcessesShareOneQuota(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		s := redistest.Start(t)
		runLoad(t, []string{s.Addr}, false, "wait", false)
	})
	t.Run("error", func(t *testing.T) {
		s := redistest.Start(t)
		runLoad(t, []string{s.Addr}, false, "error", false)
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3, 0)
		runLoad(t, c.Addrs, true, "wait", false)
	})
	t.Run("lease", func(t *testing.T) {
		s := redistest.Start(t)
		runLoad(t, []string{s.Addr}, false, "wait", true)
	})
}
