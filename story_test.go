package tollgate_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// regionChildEnv carries a region process's configuration (JSON); its
// presence makes the test binary that process (see TestMain).
const regionChildEnv = "TOLLGATE_REGION_CHILD"

// regionConfig is what a region process is told.
type regionConfig struct {
	Redis, Upstream, Name string
	Units                 int64
	Window                time.Duration
	Ends                  time.Time
	Shares                bool
}

// regionChild is one region's cron process: a Transport named after the
// region, on a clock its parent sets. It reads lines "<µs> <n>" from
// stdin: the clock's instant and how many requests to send then, and
// answers each with how many were admitted, until stdin ends.
func regionChild(raw string) int {
	var cfg regionConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "region:", err)
		return 3
	}
	var now atomic.Int64
	clock := func() time.Time { return time.UnixMicro(now.Load()) }
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	table, err := loadTable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "region:", err)
		return 3
	}
	lim, err := quota.New(rdb, quota.WithClock(clock))
	if err != nil {
		fmt.Fprintln(os.Stderr, "region:", err)
		return 3
	}
	pool := tollgate.Bucket{Limits: []quota.Limit{quota.PerFixedWindow(cfg.Units, cfg.Window, cfg.Ends)}}
	if cfg.Shares {
		weights := map[string]float64{}
		for i := range 8 {
			weights[fmt.Sprintf("region-%d", i)] = 1
		}
		pool.Shares = &tollgate.Shares{Weights: weights}
	}
	tr, err := tollgate.New(tollgate.Config{
		Name: cfg.Name, Limiter: lim, Costs: table, Scope: tollgate.Scope("story"), Transit: -1,
		Buckets: map[string]tollgate.Bucket{"pool": pool},
		Policy:  func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "region:", err)
		return 3
	}
	tollgate.SetClock(tr, clock)
	client := &http.Client{Transport: tr}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var at int64
		var n int
		if _, err := fmt.Sscan(in.Text(), &at, &n); err != nil {
			fmt.Fprintln(os.Stderr, "region:", err)
			return 3
		}
		now.Store(at)
		admitted := 0
		for range n {
			resp, err := client.Get(cfg.Upstream + "/cheap")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				admitted++
			} else if !errors.Is(err, tollgate.ErrQuotaExhausted) {
				fmt.Fprintln(os.Stderr, "region:", err)
				return 1
			}
		}
		fmt.Println(admitted)
	}
	return 0
}

// region is a region process seen from the test.
type region struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// step has the region send n requests at instant at, and returns how
// many were admitted.
func (r *region) step(t *testing.T, at time.Time, n int) int {
	t.Helper()
	fmt.Fprintf(r.in, "%d %d\n", at.UnixMicro(), n)
	if !r.out.Scan() {
		t.Fatalf("region process: no answer (%v)", r.out.Err())
	}
	k, err := strconv.Atoi(strings.TrimSpace(r.out.Text()))
	if err != nil {
		t.Fatalf("region process answered %q", r.out.Text())
	}
	return k
}

// TestStoryEightRegions is the story tollgate grew from: eight regional
// cron processes on one quota, a fixed window of 800 units an hour,
// their work starting at staggered times (every 6 minutes), region-0
// asking all window long. Without shares the first regions spend the
// window and the late ones get nothing; with shares (Lendable 0) every
// region gets at least 95% of its share, 100 units. The processes run on
// one clock the test moves, 30 seconds a step.
func TestStoryEightRegions(t *testing.T) {
	s := redistest.Start(t)
	var arrived atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { arrived.Add(1) }))
	defer up.Close()
	start := time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC)
	for _, shares := range []bool{false, true} {
		t.Run(fmt.Sprintf("shares=%v", shares), func(t *testing.T) {
			if err := s.Client(t).FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			arrived.Store(0)
			regions := make([]*region, 8)
			for i := range regions {
				raw, _ := json.Marshal(regionConfig{Redis: s.Addr, Upstream: up.URL, Name: fmt.Sprintf("region-%d", i),
					Units: 800, Window: time.Hour, Ends: start.Add(time.Hour), Shares: shares})
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), regionChildEnv+"="+string(raw))
				cmd.Stderr = os.Stderr
				in, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				regions[i] = &region{cmd: cmd, in: in, out: bufio.NewScanner(out)}
				t.Cleanup(func() {
					in.Close()
					if err := cmd.Wait(); err != nil {
						t.Errorf("region-%d: %v", i, err)
					}
				})
			}
			got := make([]int, 8)
			for step := range 120 {
				at := start.Add(time.Duration(step) * 30 * time.Second)
				for i, r := range regions {
					switch {
					case i == 0:
						got[i] += r.step(t, at, 20) // the greedy one
					case at.Sub(start) >= time.Duration(i)*6*time.Minute:
						got[i] += r.step(t, at, 4)
					}
				}
			}
			total := 0
			for _, n := range got {
				total += n
			}
			t.Logf("admitted per region: %v (%d in all)", got, total)
			if total > 800 || arrived.Load() != int64(total) {
				t.Fatalf("%d admitted and %d arrived: over the window's 800, or not what was admitted", total, arrived.Load())
			}
			if shares {
				for i, n := range got {
					if n < 95 {
						t.Errorf("region-%d got %d units, under 95%% of its share of 100", i, n)
					}
				}
				return
			}
			for i := 4; i < 8; i++ {
				if got[i] != 0 {
					t.Errorf("without shares, region-%d, starting at %v, got %d units; want none left", i, time.Duration(i)*6*time.Minute, got[i])
				}
			}
			if got[0] < 400 {
				t.Errorf("without shares, the greedy region got %d units; want most of the window", got[0])
			}
		})
	}
}
