package tollgate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// The concurrency-cap tests run the test binary as worker processes, as
// the load test does, sharing a cap of requests in flight through Redis.

// capChildEnv carries a cap worker's configuration (JSON).
const capChildEnv = "TOLLGATE_CAP_CHILD"

// capConfig is what a cap worker process is told.
type capConfig struct {
	Redis    string
	Upstream string // the URL each request gets
	Workers  int
	Requests int // per worker
	InFlight int
}

// capTransport builds the Transport every cap process uses: one bucket,
// no unit limit in reach, at most cfg.InFlight requests in flight.
func capTransport(lim *quota.Limiter, inFlight int) (*tollgate.Transport, error) {
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules:   []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}}},
	})
	if err != nil {
		return nil, err
	}
	return tollgate.New(tollgate.Config{
		Limiter: lim, Costs: table, Scope: tollgate.Scope("capped"),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, time.Hour)}, MaxInFlight: inFlight}},
		Policy:  tollgate.Policies(tollgate.Policy{MaxWait: time.Minute}, nil),
	})
}

// capChild is a cap worker process: its workers send their requests one
// after another, reading each body whole, and it prints how many failed.
func capChild(raw string) int {
	var cfg capConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "cap child:", err)
		return 3
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Workers + 4})
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cap child:", err)
		return 3
	}
	tr, err := capTransport(lim, cfg.InFlight)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cap child:", err)
		return 3
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	var failed atomic.Int64
	var firstErr atomic.Pointer[string]
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for range cfg.Requests {
				resp, err := client.Get(cfg.Upstream)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	var first string
	if p := firstErr.Load(); p != nil {
		first = *p
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"failed": failed.Load(), "first": first})
	return 0
}

// startCapChild starts a cap worker process.
func startCapChild(t *testing.T, cfg capConfig) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), capChildEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// inFlightMeter is an upstream that counts the requests it is serving at
// once, each taking a few milliseconds, and the most it ever served.
type inFlightMeter struct {
	*httptest.Server
	now, most, served atomic.Int64
	hold              chan struct{} // when set, requests wait for it to close
}

func newInFlightMeter(t *testing.T, hold chan struct{}) *inFlightMeter {
	m := &inFlightMeter{hold: hold}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := m.now.Add(1)
		for most := m.most.Load(); n > most && !m.most.CompareAndSwap(most, n); most = m.most.Load() {
		}
		if m.hold != nil {
			select {
			case <-m.hold:
			case <-r.Context().Done():
			}
		} else {
			time.Sleep(3 * time.Millisecond)
		}
		m.now.Add(-1)
		m.served.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(m.Close)
	return m
}

// TestCapOfRequestsInFlight: four processes of fifty goroutines share a
// cap of twenty requests in flight: the upstream never serves more than
// twenty at once, and every request is served.
func TestCapOfRequestsInFlight(t *testing.T) {
	s := redistest.Start(t)
	up := newInFlightMeter(t, nil)
	const procs, workers, requests, capacity = 4, 50, 8, 20
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range procs {
		cmd, out := startCapChild(t, capConfig{Redis: s.Addr, Upstream: up.URL + "/", Workers: workers, Requests: requests, InFlight: capacity})
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		var res struct {
			Failed int64
			First  string
		}
		if err := json.Unmarshal(outs[i].Bytes(), &res); err != nil || res.Failed != 0 {
			t.Errorf("process %d: %d requests failed (first: %s) %v", i, res.Failed, res.First, err)
		}
	}
	if got := up.served.Load(); got != procs*workers*requests {
		t.Errorf("the upstream served %d requests, want %d", got, procs*workers*requests)
	}
	if most := up.most.Load(); most > capacity || most < capacity/2 {
		t.Errorf("the upstream served at most %d at once; want at most %d, and the cap reached or near", most, capacity)
	}
	t.Logf("%d requests, at most %d in flight (cap %d)", up.served.Load(), up.most.Load(), capacity)
}

// TestSlotsOfAKilledProcessExpire: a process killed (SIGKILL) while its
// twenty requests hold every slot frees them within quota.SlotTTL: a
// process sharing the cap gets all twenty without waiting longer.
func TestSlotsOfAKilledProcessExpire(t *testing.T) {
	s := redistest.Start(t)
	hold := make(chan struct{})
	defer close(hold)
	up := newInFlightMeter(t, hold)
	const capacity = 20
	cmd, _ := startCapChild(t, capConfig{Redis: s.Addr, Upstream: up.URL + "/", Workers: capacity, Requests: 1, InFlight: capacity})
	for i := 0; up.now.Load() < capacity && i < 3000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if up.now.Load() != capacity {
		cmd.Process.Kill()
		t.Fatalf("the child holds %d requests in flight, want %d", up.now.Load(), capacity)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()

	lim := limiterOn(t, s.Client(t))
	tr, err := capTransport(lim, capacity)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// The survivor's requests answer at once: they must not wait on the
	// upstream the dead process left hanging.
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer fast.Close()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range capacity {
		wg.Go(func() {
			resp, err := (&http.Client{Transport: tr}).Get(fast.URL + "/")
			if err != nil {
				failed.Add(1)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	took := time.Since(killed)
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed after the kill", failed.Load(), capacity)
	}
	if took > quota.SlotTTL+2*time.Second {
		t.Errorf("the dead process's slots came free %v after the kill, want within quota.SlotTTL (%v)", took, quota.SlotTTL)
	}
	t.Logf("all %d slots free %v after the kill", capacity, took)
}
