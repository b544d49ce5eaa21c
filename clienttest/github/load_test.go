package github_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/ghsim"
	"github.com/tollgate/tollgate/internal/redistest"
)

func TestMain(m *testing.M) { rig.Main(m, workerEnv, runWorker) }

// scenario is one load run: the simulated API, the clock it runs on, the
// processes and their mix, and the limit that binds.
type scenario struct {
	name         string
	sim          ghsim.Config  // but its Minute and Hour, which are the scenario's
	minute, hour time.Duration // 0: GitHub's
	run          time.Duration
	settle       time.Duration // from the start, before the binding limit is measured
	procs        int
	workers      int // per process
	mix          mix
	// binding reads the share of the binding limit the run used, and
	// names it.
	binding func(m measured) (share float64, what string)
}

// measured is what a run leaves to measure: the API, when its processes
// started, when the measure began (the start and the scenario's settle),
// when the processes stopped starting operations, and the API's
// statistics at those two instants.
type measured struct {
	sim                *ghsim.Server
	start, from, until time.Time
	atFrom, atUntil    ghsim.Stats
}

// startDelay is how long the processes get to start (a race-enabled
// binary takes a while) before they all begin at one instant.
const startDelay = time.Second

// latency draws a request's time at the API between lo and hi.
func latency(lo, hi time.Duration) func(*http.Request) time.Duration {
	return func(*http.Request) time.Duration { return lo + rand.N(hi-lo) }
}

// coreShare is the share of the core limit used in the core windows
// that ended before the run did, but the first: the processes' first
// requests take a while (160 connections to open, under the race
// detector), so the first window measures the machine's start.
func coreShare(m measured) (float64, string) {
	windows := m.sim.Windows(ghsim.Core)
	slices.SortFunc(windows, func(a, b ghsim.Window) int { return a.Start.Compare(b.Start) })
	var used, limit int64
	var each []string
	for i, w := range windows {
		if i > 0 && !w.Reset.After(m.until) {
			used, limit = used+w.Used, limit+w.Limit
			each = append(each, fmt.Sprintf("%d/%d", w.Used, w.Limit))
		}
	}
	if limit == 0 {
		return 0, "core: no whole window after the first during the run"
	}
	return float64(used) / float64(limit), "core, per hour: " + strings.Join(each, ", ")
}

// inFlightShare is the mean number of requests in flight at the API
// while it was measured, as a share of the 100 GitHub allows.
func inFlightShare(m measured) (float64, string) {
	span := m.atUntil.Last.Sub(m.atFrom.Last)
	if span <= 0 {
		return 0, "requests in flight: nothing measured"
	}
	mean := float64(m.atUntil.InFlightTime-m.atFrom.InFlightTime) / float64(span)
	return mean / 100, "requests in flight"
}

// restPointsShare is the share of the REST API's secondary points a
// minute the run used while it was measured.
func restPointsShare(m measured) (float64, string) {
	var points int64
	for _, a := range m.sim.Served() {
		if !a.GraphQL && !a.At.Before(m.from) && !a.At.After(m.until) {
			points += a.Points
		}
	}
	return float64(points) / (900 * m.until.Sub(m.from).Minutes()), "REST points, per minute"
}

// scenarios are the runs: GitHub's hour and minute scaled to six seconds
// and one, core's limit lowered to 200 so that it binds at a pace a small
// machine keeps up with, race detector on; then slow answers, so that the cap on requests in
// flight binds; then, when asked for, GitHub's real clock and limits, where
// REST's secondary points bind.
func scenarios() []scenario {
	mixed := mix{Get: 40, List: 15, Search: 8, Code: 3, Create: 5, Query: 10, Heavy: 1, User: 4}
	scaled := []scenario{{
		name:   "rate",
		sim:    ghsim.Config{Core: 200, Latency: latency(5*time.Millisecond, 40*time.Millisecond)},
		minute: time.Second, hour: 6 * time.Second,
		run: 15 * time.Second, procs: 4, workers: 40, mix: mixed,
		binding: coreShare,
	}, {
		name:   "concurrency",
		sim:    ghsim.Config{Latency: latency(800*time.Millisecond, 1200*time.Millisecond)},
		minute: time.Second, hour: 6 * time.Second,
		run: 4 * time.Second, settle: 1500 * time.Millisecond, procs: 4, workers: 40, mix: mixed,
		binding: inFlightShare,
	}}
	if os.Getenv("TOLLGATE_GITHUB_REALTIME") == "" {
		return scaled
	}
	return append(scaled, scenario{
		name: "realtime",
		sim:  ghsim.Config{Latency: latency(5*time.Millisecond, 40*time.Millisecond)},
		run:  3 * time.Minute, settle: time.Minute, procs: 4, workers: 40,
		mix:     mix{Get: 40, List: 15, Search: 2, Code: 1, Create: 5, Query: 10, Heavy: 1, User: 4},
		binding: restPointsShare,
	})
}

// TestManyProcesses runs go-github in several processes of many
// goroutines, each through its own Transport on one Redis, with one
// token, against the simulated API: GitHub refuses nothing, never has
// more than 100 requests in flight, and the limit that binds is at least
// 70% used.
func TestManyProcesses(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			cfg := sc.sim // the API and the Transports count in one clock
			cfg.Minute, cfg.Hour = sc.minute, sc.hour
			sim := ghsim.New(cfg)
			api := httptest.NewServer(sim)
			defer api.Close()
			s := redistest.Start(t)
			start := time.Now().Add(startDelay)
			until := start.Add(sc.run)
			var cfgs []any
			for p := range sc.procs {
				cfgs = append(cfgs, workerConfig{Redis: s.Addr, API: api.URL, Token: "ghp_loadtest", Workers: sc.workers,
					Start: start, Until: until, Minute: sc.minute, Hour: sc.hour, Mix: sc.mix, Seed: uint64(p + 1)})
			}
			procs := rig.Start(t, workerEnv, cfgs...)
			m := measured{sim: sim, start: start, from: start.Add(sc.settle), until: until}
			time.Sleep(time.Until(m.from))
			m.atFrom = sim.Stats()
			time.Sleep(time.Until(until))
			m.atUntil = sim.Stats()
			total := workerReport{Calls: map[string]int{}}
			for _, rep := range rig.Wait[workerReport](t, procs) {
				for k, n := range rep.Calls {
					total.Calls[k] += n
				}
				total.Refused += rep.Refused
				total.Upstream += rep.Upstream
				total.Limited += rep.Limited
				total.Cut += rep.Cut
				total.Failed += rep.Failed
				if total.First == "" {
					total.First = rep.First
				}
			}
			st := sim.Stats()
			share, what := sc.binding(m)
			t.Logf("%d served, at most %d in flight, %.0f%% of the binding limit (%s); operations %v; tollgate refused %d (the run's end cut %d)",
				st.Served, st.MostInFlight, 100*share, what, total.Calls, total.Refused, total.Cut)
			if st.Primary+st.Secondary != 0 || total.Limited+total.Upstream != 0 {
				t.Errorf("GitHub refused %d requests for a primary limit and %d for a secondary one; go-github saw %d, tollgate %d",
					st.Primary, st.Secondary, total.Limited, total.Upstream)
			}
			if total.Refused != 0 {
				t.Errorf("tollgate refused %d operations it could have waited for", total.Refused)
			}
			if total.Failed != 0 {
				t.Errorf("%d operations failed; the first: %s", total.Failed, total.First)
			}
			if st.MostInFlight > 100 {
				t.Errorf("%d requests in flight at once; GitHub allows 100", st.MostInFlight)
			}
			if share < 0.7 {
				t.Errorf("%.0f%% of the binding limit (%s) used; want at least 70%%", 100*share, what)
			}
		})
	}
}
