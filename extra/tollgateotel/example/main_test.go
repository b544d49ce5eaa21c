package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMetricsMatchTheRun runs the example as `go run ./example -metrics
// ADDR` does, with a short window, scrapes its metrics, and checks them
// against what the simulated API received and what the run printed.
func TestMetricsMatchTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-metrics", "127.0.0.1:0", "-window", "300ms"}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stdout.String(), "serving the metrics until interrupted") {
		select {
		case code := <-done:
			t.Fatalf("exit %d before serving: %s\n%s", code, stderr.String(), stdout.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end within a minute:\n%s", stdout.String())
		}
	}
	out := stdout.String()
	m := regexp.MustCompile(`metrics at (http://\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no metrics address in the output:\n%s", out)
	}
	scraped := scrape(t, m[1])
	run := readReport(t, out)

	if run.failed != 0 || run.quotaErrors != 0 {
		t.Errorf("%d jobs failed, %d quota errors from the upstream:\n%s", run.failed, run.quotaErrors, out)
	}
	for method, calls := range run.calls {
		if got := scraped.sum("tollgate_rate_limiting_requests_total", "tollgate_endpoint", method, "tollgate_rate_limiting_result", "admitted"); got != float64(calls) {
			t.Errorf("requests admitted for %s: scraped %v, the upstream received %d", method, got, calls)
		}
	}
	for bucket, units := range run.units {
		if got := scraped.sum("tollgate_rate_limiting_units_charged_total", "tollgate_bucket", bucket); got != float64(units) {
			t.Errorf("units charged to %s: scraped %v, the upstream charged %d", bucket, got, units)
		}
	}
	if got := scraped.sum("tollgate_rate_limiting_request_time_in_queue_seconds_count"); got != float64(run.waits) || run.waits == 0 {
		t.Errorf("waits: scraped %v, the run's own hook saw %d (want some)", got, run.waits)
	}
	if got := scraped.sum("tollgate_rate_limiting_queued_requests"); got != 0 {
		t.Errorf("%v requests still counted as queued after the run", got)
	}
	for bucket, q := range run.quota {
		limit := scraped.sum("tollgate_quota_limit", "tollgate_bucket", bucket)
		left := scraped.sum("tollgate_quota_remaining", "tollgate_bucket", bucket)
		// The window slides on between the report and the scrape: more may
		// be left, never less.
		if limit != float64(q.limit) || left < float64(q.left) || left > limit {
			t.Errorf("%s: scraped %v of %v left, the run printed %d of %d", bucket, left, limit, q.left, q.limit)
		}
	}
	if got := scraped.sum("tollgate_redis_available"); got != 1 {
		t.Errorf("redis available = %v, want 1", got)
	}

	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after an interrupt, want 0: %s", code, stderr.String())
	}
}

// report is what the run printed.
type report struct {
	calls         map[string]int64 // by method
	units         map[string]int64 // by bucket
	quota         map[string]struct{ left, limit int64 }
	waits, failed int64
	quotaErrors   int64
}

var (
	tableRow  = regexp.MustCompile(`(?m)^(\w+\.\w+)\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)$`)
	waitsLine = regexp.MustCompile(`waits for a turn: (\d+); failed jobs: (\d+)`)
	quotaLine = regexp.MustCompile(`(?m)^(\w+): (\d+) of (\d+) left$`)
)

func readReport(t *testing.T, out string) report {
	t.Helper()
	r := report{calls: map[string]int64{}, units: map[string]int64{}, quota: map[string]struct{ left, limit int64 }{}}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, m := range tableRow.FindAllStringSubmatch(out, -1) {
		r.calls[m[1]] += num(m[3])
		r.units[m[2]] += num(m[4])
		r.quotaErrors += num(m[5])
	}
	w := waitsLine.FindStringSubmatch(out)
	if len(r.calls) == 0 || w == nil {
		t.Fatalf("no report in the output:\n%s", out)
	}
	r.waits, r.failed = num(w[1]), num(w[2])
	for _, m := range quotaLine.FindAllStringSubmatch(out, -1) {
		r.quota[m[1]] = struct{ left, limit int64 }{num(m[2]), num(m[3])}
	}
	if len(r.quota) != 2 {
		t.Fatalf("the output gives %d buckets' quota, want 2:\n%s", len(r.quota), out)
	}
	return r
}

// series are the samples of a Prometheus text exposition.
type series []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// scrape reads url's metrics.
func scrape(t *testing.T, url string) series {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var s series
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, rest := line, "", ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			name, labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			t.Fatalf("a sample %q: %v", line, err)
		}
		smp := sample{name: name, labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(labels, -1) {
			smp.labels[p[1]] = p[2]
		}
		s = append(s, smp)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// sum adds the samples of name whose labels have the values given, as
// label, value pairs.
func (s series) sum(name string, labelValues ...string) float64 {
	var total float64
next:
	for _, smp := range s {
		if smp.name != name {
			continue
		}
		for i := 0; i+1 < len(labelValues); i += 2 {
			if smp.labels[labelValues[i]] != labelValues[i+1] {
				continue next
			}
		}
		total += smp.value
	}
	return total
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
