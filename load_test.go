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
		Trace:   tollgate.Trace{Decided: recordAdmission},
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
	time.Sleep(time.Until(cfg.Start))
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Start.Add(cfg.Duration))
	defer cancel()
	results := make([]workerResult, cfg.Workers)
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
				resp, err := client.Do(req)
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
					} else {
						res.Failed++
						res.FirstErr = cmp(res.FirstErr, resp.Status)
					}
				case ctx.Err() != nil:
					return // the run is over
				case errors.As(err, &qe):
					res.Refused++
					// A caller that may not wait comes back when told.
					select {
					case <-time.After(max(qe.RetryAfter, time.Millisecond)):
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
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		return 3
	}
	return 0
}

// stampSent marks each request with its admission instant and the instant
// it leaves the Transport, so that the upstream can measure the trip.
type stampSent struct{ base http.RoundTripper }

type admissionKey struct{}

// admission is what the decision hook tells of a request.
type admission struct {
	at     time.Time
	leased bool
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
		a.at, a.leased = d.At, d.Leased
	}
}

// cmp keeps the first non-empty string.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// meter is the parent's upstream: it records every arrival and enforces a
// fixed-window quota of its own, answering 429 past it.
type meter struct {
	*httptest.Server
	quota  int64
	window time.Duration

	mu       sync.Mutex
	arrivals []admitted
	windows  map[int64]int64
	refused  int
}

type admitted struct {
	at, sent, admitted time.Time
	cost               int64
}

func newMeter(t *testing.T, quotaUnits int64, window time.Duration) *meter {
	m := &meter{quota: quotaUnits, window: window, windows: map[int64]int64{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		sent, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Sent"))
		adm, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Admitted"))
		cost := int64(1)
		if r.URL.Path == "/dear" {
			cost = 100
		}
		m.mu.Lock()
		k := now.UnixNano() / int64(m.window)
		over := m.windows[k]+cost > m.quota
		if over {
			m.refused++
		} else {
			m.windows[k] += cost
			m.arrivals = append(m.arrivals, admitted{now, sent, adm, cost})
		}
		m.mu.Unlock()
		if over {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(m.Close)
	return m
}

// loadRun is one many-process run and what its checks measured.
type loadRun struct {
	calls, units, most int64
	utilization        float64
}

// runLoad starts procs worker processes against rdbAddrs and checks the
// upstream's arrivals: no quota error, no sliding window over the limit
// (but for a few milliseconds of transit), high utilization, no starving
// worker.
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
	// The upstream's own quota sits 5% above the limit, as the reserve
	// does in production: it absorbs transit jitter across its fixed
	// window boundaries, which the sliding check below does not forgive.
	up := newMeter(t, units*105/100, window)

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
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker process %d: %v", i, err)
		}
		var rs []workerResult
		if err := json.Unmarshal(outs[i].Bytes(), &rs); err != nil {
			t.Fatalf("worker process %d printed %q: %v", i, outs[i].String(), err)
		}
		results = append(results, rs...)
	}

	up.mu.Lock()
	arrivals, refused := slices.Clone(up.arrivals), up.refused
	up.mu.Unlock()
	if refused > 0 {
		t.Errorf("the upstream refused %d calls over its quota", refused)
	}
	slices.SortFunc(arrivals, func(a, b admitted) int { return a.at.Compare(b.at) })
	// The arrivals, with a few milliseconds forgiven for the trip from
	// decision to arrival; and the admissions, on the limiter's clock.
	const forgiven = 5 * time.Millisecond
	var run loadRun
	var slowest, latest time.Duration
	arrived := make([]windowcheck.Call, len(arrivals))
	decided := make([]windowcheck.Call, len(arrivals))
	for i, a := range arrivals {
		slowest = max(slowest, a.at.Sub(a.sent))
		latest = max(latest, a.sent.Sub(a.admitted))
		run.calls++
		run.units += a.cost
		arrived[i] = windowcheck.Call{At: a.at, Units: a.cost}
		decided[i] = windowcheck.Call{At: a.admitted, Units: a.cost}
	}
	run.most, _ = windowcheck.Most(arrived, window-forgiven)
	if mostAdmitted, _ := windowcheck.Most(decided, window+transit); mostAdmitted > units {
		t.Errorf("%d units were admitted within one window of %v, over the limit of %d", mostAdmitted, window, units)
	}
	if run.most > units {
		t.Errorf("%d units arrived within one window (less %v of transit), over the limit of %d; the slowest trip took %v, the latest send %v after its admission",
			run.most, forgiven, units, slowest, latest)
	}
	if len(arrivals) > 1 {
		span := arrivals[len(arrivals)-1].at.Sub(arrivals[0].at)
		// What the limit allowed: its units per window, lengthened by the
		// transit guard it is configured with.
		allowed := float64(units) * (float64(span)/float64(window+transit) + 1)
		run.utilization = float64(run.units) / allowed
	}
	if run.utilization < 0.9 {
		t.Errorf("utilization %.1f%%: the upstream received %d units of the %d per %v (and %v of transit) the limit allowed",
			100*run.utilization, run.units, units, window, transit)
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
	t.Logf("%s (lease %v): %d calls (%d from leases), %d units arrived; at most %d units in a window of %v (limit %d); utilization %.1f%%",
		policy, lease, run.calls, leased, run.units, run.most, window, units, 100*run.utilization)
	return run
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
