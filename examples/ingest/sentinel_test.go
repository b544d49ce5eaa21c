package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// admitted matches a line of a call admitted (a pass done, or a wait for
// a turn over) and its instant since the process began.
var admitted = regexp.MustCompile(`(?m)^\s*([0-9.]+)s  \[[A-Z]{2}\] (pass \d+ done|waited [0-9.]+s for its turn)`)

// TestProcessesCarryOnThroughAFailover: three ingest processes share one
// quota through a Sentinel URL (a master, two replicas, three sentinels)
// against the simulated YouTube API. A few seconds in, the master is
// killed with SIGKILL; the sentinels promote a replica, and every process
// follows it: each ends with exit status 0 and spends after the
// promotion, and the upstream answered no quota error and received no more
// than its quota in any of its windows. While no master answers, the
// processes fail closed (tollgate's default): nothing is sent unmetered.
func TestProcessesCarryOnThroughAFailover(t *testing.T) {
	set := redistest.StartSentinel(t, 2, redistest.Options{})
	const quota = 600
	window := 2 * time.Second
	sim := ytsim.New(ytsim.Config{Quota: quota, Window: window})
	api := httptest.NewServer(sim)
	defer api.Close()
	// A reserve of a quarter, where the default keeps 5% (30 units): on a
	// loaded machine (CI, -race) a 100-unit search.list can reach the
	// upstream later than Transit (50ms) after its admission, into one of
	// the upstream's windows with calls admitted a window after it, and
	// the test is of the failover, not of Transit.
	args := []string{"-redis", set.URL(), "-api", api.URL + "/youtube/v3", "-keys", "shared-key",
		"-table", "classic", "-quota", strconv.Itoa(quota), "-reserve", strconv.Itoa(quota / 4),
		"-window", window.String(), "-duration", "10s", "-regions", "US,GB,DE"}
	raw, _ := json.Marshal(args)

	type result struct {
		started   time.Time
		out, errs bytes.Buffer
		err       error
	}
	results := make([]*result, 3)
	var wg sync.WaitGroup
	for i := range results {
		r := &result{}
		results[i] = r
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childArgs+"="+string(raw))
		cmd.Stdout, cmd.Stderr = &r.out, &r.errs
		r.started = time.Now()
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Go(func() {
			defer cancel()
			r.err = cmd.Wait()
		})
	}
	time.Sleep(3 * time.Second)
	killed := time.Now()
	set.Master.Kill()
	promoted := set.WaitPromoted(t, set.Master.Addr)
	promotedAt := time.Now()
	t.Logf("%s promoted %v after the kill", promoted.Addr, promotedAt.Sub(killed).Round(10*time.Millisecond))
	wg.Wait()
	defer func() {
		if t.Failed() { // what the servers and a sentinel saw
			for _, n := range append(set.Replicas, set.Sentinels[0]) {
				b, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
				t.Logf("the log of %s:\n%s", n.Addr, b)
			}
		}
	}()

	for i, r := range results {
		out := r.out.String()
		if r.err != nil {
			t.Errorf("process %d: %v: %s\n%s", i, r.err, r.errs.String(), out)
			continue
		}
		if !strings.Contains(out, "upstream quota errors: 0") {
			t.Errorf("process %d saw quota errors:\n%s", i, out)
		}
		after := 0
		for _, m := range admitted.FindAllStringSubmatch(out, -1) {
			s, _ := strconv.ParseFloat(m[1], 64)
			if r.started.Add(time.Duration(s * float64(time.Second))).After(promotedAt) {
				after++
			}
		}
		if after == 0 {
			t.Errorf("process %d spent nothing after the promotion:\n%s", i, out)
		}
		t.Logf("process %d: %d passes done or turns come after the promotion; %d passes cut short by the failover",
			i, after, strings.Count(out, "Redis unavailable"))
	}
	st := sim.Stats()["shared-key"]
	if st.QuotaErrors != 0 {
		t.Errorf("the upstream answered %d quotaExceeded", st.QuotaErrors)
	}
	if most := mostInAWindow(sim.Arrivals(), ytsim.Pool, window); most > quota {
		t.Errorf("the upstream received %d units in one of its windows, over its quota of %d", most, quota)
	} else {
		t.Logf("upstream: %d requests, %d units, at most %d of %d in a window", st.Requests, st.Units, most, quota)
	}
}

// TestSentinelWithoutReplica: a master set with no replica to acknowledge
// the decisions stops the example at start, in one line naming the
// setting, the master set and its sentinels, and no password.
func TestSentinelWithoutReplica(t *testing.T) {
	set := redistest.StartSentinel(t, 0, redistest.Options{Password: "no-replica-secret"})
	code, out, errOut := runChild(t, []string{"-redis", set.URL(), "-duration", "1s"})
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, `Sentinel master set "tollgate" (sentinels 127.0.0.1:`) ||
		!strings.Contains(errOut, "quota.WithReplicas") || strings.Contains(errOut, "no-replica-secret") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line naming the master set and quota.WithReplicas", code, out, errOut)
	}
}
