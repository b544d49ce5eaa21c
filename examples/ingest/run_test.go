package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// TestOfflineDemo runs the main job as `go run ./examples/ingest` does,
// with a shorter window: eight regions against the simulated API, more
// searches than one window holds, so some regions wait their turn.
func TestOfflineDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"-window", "400ms"}, &stdout, &stderr, noEnv)
	took := time.Since(start)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d; stderr %s\n%s", code, stderr.String(), out)
	}
	for _, want := range []string{"simulated YouTube API", "[US] pass 1 done", "waited", "total", "upstream quota errors: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "refused by the upstream") {
		t.Errorf("the upstream refused a call:\n%s", out)
	}
	// The regions wait side by side: the total is the longest wait, which
	// no run outlasts, never their sum.
	var longest float64
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "total" {
			i := slices.Index(f, "longest")
			if i < 0 || i+1 == len(f) {
				t.Fatalf("the total row does not say the longest wait: %q", line)
			}
			if _, err := fmt.Sscanf(f[i+1], "%fs", &longest); err != nil {
				t.Fatalf("the total row's wait %q: %v", f[i+1], err)
			}
		}
	}
	if longest <= 0 || longest > took.Seconds()+0.05 {
		t.Errorf("the total row says a wait of %.1fs in a run of %v:\n%s", longest, took, out)
	}
}

// The summary names the bucket that stopped the regions (search: 3 calls
// an hour after the reserve, against 8 regions), and calls search's
// spending units, as every other line does.
func TestSummaryNamesTheBindingBucket(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-window", "1h", "-policy", "error"}, &stdout, &stderr, noEnv)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d; stderr %s\n%s", code, stderr.String(), out)
	}
	for _, want := range []string{
		"4 search units per 1h0m0s, 3 after the reserve",
		"3 of 4 search units (the binding bucket); ",
		"spent 40 pool units and 3 search units in all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "search call") {
		t.Errorf("the output counts search in calls and in units:\n%s", out)
	}
}

func TestOfflineDemoErrorPolicy(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-window", "1h", "-policy", "error", "-table", "classic"}, &stdout, &stderr, noEnv)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d; stderr %s\n%s", code, stderr.String(), out)
	}
	// 600 units an hour, 570 after the reserve: five passes of 105 fit, the
	// other three regions stop cleanly at their search.
	if got := strings.Count(out, "stopped cleanly: search.list refused"); got != 3 {
		t.Errorf("%d regions stopped at search.list, want 3:\n%s", got, out)
	}
	if !strings.Contains(out, "upstream quota errors: 0") {
		t.Errorf("output:\n%s", out)
	}
}

// TestUnreachableRedis: a Redis that does not answer is a clear error
// within a few seconds and exit 1, not a hang.
func TestUnreachableRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-redis", "redis://127.0.0.1:1"}, &stdout, &stderr, noEnv)
	if ctx.Err() != nil {
		t.Fatal("run hung on an unreachable Redis")
	}
	if code != 1 || !strings.Contains(stderr.String(), "does not answer") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line saying Redis does not answer", code, stderr.String())
	}
}

// TestUnreachableRedisOneLine: run as a program, an unreachable Redis is
// one line on stderr, tollgate's, with none of go-redis's own log lines
// ("pool.go:762: redis: connection pool: failed to dial ...") before it.
func TestUnreachableRedisOneLine(t *testing.T) {
	code, out, errOut := runChild(t, []string{"-redis", "redis://127.0.0.1:1"})
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "ingest: redis at redis://127.0.0.1:1 does not answer") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line saying Redis does not answer", code, out, errOut)
	}
}

// TestRunsShareOneQuota: three runs (three Transports, three limiters, as
// three processes would have) share a real redis-server and one simulated
// upstream; together they stay inside its quota.
func TestRunsShareOneQuota(t *testing.T) {
	srv := redistest.Start(t)
	window := 500 * time.Millisecond
	sim := ytsim.New(ytsim.Config{Quota: 120, Window: window, Granular: true, SearchQuota: 6})
	api := httptest.NewServer(sim)
	defer api.Close()
	args := []string{
		"-redis", "redis://" + srv.Addr, "-api", api.URL + "/youtube/v3", "-keys", "shared-key",
		"-quota", "120", "-search-quota", "6", "-window", window.String(), "-duration", "3s",
	}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 3)
	codes := make([]int, 3)
	for i := range 3 {
		wg.Go(func() {
			var stderr bytes.Buffer
			codes[i] = run(context.Background(), args, &outs[i], &stderr, noEnv)
			if codes[i] != 0 {
				t.Errorf("run %d: exit %d: %s", i, codes[i], stderr.String())
			}
		})
	}
	wg.Wait()
	st := sim.Stats()["shared-key"]
	if st.QuotaErrors != 0 {
		t.Errorf("the upstream answered %d quotaExceeded", st.QuotaErrors)
	}
	if most := mostInAWindow(sim.Arrivals(), ytsim.Pool, window); most > 120 {
		t.Errorf("the upstream received %d pool units in one window, over its quota of 120", most)
	}
	if st.Units < 120 {
		t.Errorf("three runs over six windows spent only %d pool units: the upstream was not kept busy", st.Units)
	}
	t.Logf("upstream: %+v", st)
}
