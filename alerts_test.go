package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// alertLog collects what a Trace's alert functions are told.
type alertLog struct {
	mu        sync.Mutex
	crossings []tollgate.Alert
	alerts    []tollgate.Alert
}

func (l *alertLog) trace() tollgate.Trace {
	return tollgate.Trace{
		Crossed: func(_ context.Context, c tollgate.Alert) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.crossings = append(l.crossings, c)
		},
		Burning: func(_ context.Context, a tollgate.Alert) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.alerts = append(l.alerts, a)
		},
	}
}

// take returns what was told since the last take.
func (l *alertLog) take() ([]tollgate.Alert, []tollgate.Alert) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, a := l.crossings, l.alerts
	l.crossings, l.alerts = nil, nil
	return c, a
}

// spendN sends n requests to path through tr, each read to its end.
func spendN(t *testing.T, tr http.RoundTripper, method, url string, n int, each func()) {
	t.Helper()
	for range n {
		resp, err := send(t, tr, context.Background(), method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if each != nil {
			each()
		}
	}
}

// TestCrossedOncePerCrossing: a Transport spending a window past 80% and
// then 95% of its limit reports each crossing once, at the check after it
// (on a real redis-server); a check while the process is idle reads
// nothing from Redis.
func TestCrossedOncePerCrossing(t *testing.T) {
	s, rdb := realRedis(t)
	up := newUpstream(t)
	var log alertLog
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rdb), Costs: table(t), Buckets: buckets(100, time.Hour), Transit: -1,
		// Crossed alone: Burning would read the window while its alert is
		// on, and spending 98% of it within minutes puts it on.
		Thresholds: []float64{0.95, 0.8}, Trace: tollgate.Trace{Crossed: log.trace().Crossed},
	})
	items := up.URL + "/v1/items"
	for _, step := range []struct {
		spend int
		want  string
	}{
		{79, "[]"},
		{6, "[0.8 at 85]"},
		{11, "[0.95 at 96]"},
		{2, "[]"},
		{0, "[]"},
	} {
		spendN(t, tr, "GET", items, step.spend, nil)
		tollgate.CheckAlerts(tr)
		crossings, _ := log.take()
		var got []string
		for _, c := range crossings {
			if c.Scope != tollgate.DefaultScope || c.Bucket != "pool" || c.Limit != quota.PerWindow(100, time.Hour) {
				t.Errorf("crossing %+v, want the default scope's pool, 100/1h", c)
			}
			got = append(got, fmt.Sprintf("%v at %d", c.Threshold, c.Used))
		}
		if g := "[" + strings.Join(got, " ") + "]"; g != step.want {
			t.Errorf("after %d more units: crossed %s, want %s", step.spend, g, step.want)
		}
	}
	// Idle: a check sends Redis nothing.
	// (Once what the last requests started in the background, their
	// buckets' descriptions, is written.)
	c := s.Client(t)
	before := processed(t, c)
	for i := 0; ; i++ {
		time.Sleep(20 * time.Millisecond)
		now := processed(t, c)
		if now == before+1 {
			before = now
			break
		}
		if i == 100 {
			t.Fatal("Redis never quiet for 20 ms")
		}
		before = now
	}
	tollgate.CheckAlerts(tr)
	if after := processed(t, c); after != before+1 { // +1: the INFO that read before
		t.Errorf("an idle check: %d commands, want none", after-before-1)
	}
}

// processed reads how many commands Redis has processed.
func processed(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no total_commands_processed in INFO stats")
	return 0
}

// TestBurningFiresForAFastSpender: a process spending a sliding hour
// fast enough to spend it before its units come back, at the rates of
// both spans, is told the alert starts once; once it stops spending and
// the short span sees no more, the alert ends, once; then an idle check
// tells nothing.
func TestBurningFiresForAFastSpender(t *testing.T) {
	_, rdb := realRedis(t)
	up := newUpstream(t)
	clock := testclock.New(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	var log alertLog
	hour := quota.PerWindow(10000, time.Hour)
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rdb, quota.WithClock(clock.Now)), Costs: table(t), Transit: -1, Trace: log.trace(),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{hour}}, "search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}}},
	})
	tollgate.SetClock(tr, clock.Now)
	// 50 units every 2 s for two minutes: 3000 units, 20 a second over
	// the long span (2m30s of an hour): the 7000 left go in 350 s, and
	// nothing leaves for an hour.
	spendN(t, tr, "POST", up.URL+"/v1/upload", 60, func() { clock.Add(2 * time.Second) })
	tollgate.CheckAlerts(tr)
	_, alerts := log.take()
	if len(alerts) != 1 || !alerts[0].Firing || alerts[0].Limit != hour || alerts[0].Used != 3000 ||
		alerts[0].Span != 150*time.Second || alerts[0].Spent.IsZero() || !alerts[0].Spent.Before(alerts[0].Back) {
		t.Fatalf("alerts %+v, want one starting for the hour, 3000 used, over 2m30s, spent before units come back", alerts)
	}
	t.Logf("burning: %.3g/s over %v, spent at %v, units back at %v", alerts[0].Rate, alerts[0].Span, alerts[0].Spent, alerts[0].Back)
	// Still burning (read again though idle, while the alert is on): no
	// news.
	tollgate.CheckAlerts(tr)
	if _, alerts := log.take(); len(alerts) != 0 {
		t.Errorf("a second check told %+v, want nothing", alerts)
	}
	// A minute without spending: the short span (12.5 s) sees none.
	clock.Add(time.Minute)
	tollgate.CheckAlerts(tr)
	if _, alerts := log.take(); len(alerts) != 1 || alerts[0].Firing {
		t.Errorf("after a quiet minute: %+v, want the alert ending", alerts)
	}
	tollgate.CheckAlerts(tr)
	if _, alerts := log.take(); len(alerts) != 0 {
		t.Errorf("an idle check told %+v, want nothing", alerts)
	}
}

// TestAlertsRunInTheBackground: the Transport checks on its own, every
// few seconds (here 10 ms), and stops when closed.
func TestAlertsRunInTheBackground(t *testing.T) {
	defer tollgate.SetAlertEvery(10 * time.Millisecond)()
	_, rdb := realRedis(t)
	up := newUpstream(t)
	var log alertLog
	tr, err := tollgate.New(tollgate.Config{
		Limiter: limiterOn(t, rdb), Costs: table(t), Buckets: buckets(10, time.Hour), Transit: -1,
		Thresholds: []float64{0.5}, Trace: tollgate.Trace{Crossed: log.trace().Crossed},
	})
	if err != nil {
		t.Fatal(err)
	}
	spendN(t, tr, "GET", up.URL+"/v1/items", 6, nil)
	for i := 0; ; i++ {
		if c, _ := log.take(); len(c) == 1 && c[0].Threshold == 0.5 {
			break
		} else if len(c) > 0 {
			t.Fatalf("crossings %+v, want one of 0.5", c)
		}
		if i == 500 {
			t.Fatal("no crossing reported within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// Thresholds outside (0, 1] are a configuration error.
func TestThresholdsValidated(t *testing.T) {
	lim := inProcess(t)
	for _, th := range [][]float64{{0}, {1.5}, {-0.2}, {0.8, 2}} {
		_, err := tollgate.New(tollgate.Config{Limiter: lim, Costs: table(t), Buckets: buckets(10, time.Hour), Thresholds: th})
		if !errors.Is(err, tollgate.ErrConfig) || !strings.Contains(err.Error(), "Thresholds") {
			t.Errorf("Thresholds %v: %v, want ErrConfig naming Thresholds", th, err)
		}
	}
}
