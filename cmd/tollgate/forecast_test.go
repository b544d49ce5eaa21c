package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// steady spends units every interval in scope's bucket "pool" under lims,
// from the clock's instant for n calls, moving the clock; it returns the
// instant of the last call.
func steady(t *testing.T, lim *quota.Limiter, clock *testclock.Clock, scope string, units int64, every time.Duration, n int, lims ...quota.Limit) time.Time {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if i > 0 {
			clock.Add(every)
		}
		r, err := lim.Allow(ctx, scope, quota.Demand{Bucket: "pool", Units: units, Limits: lims})
		if err != nil || !r.OK() {
			t.Fatalf("call %d at %v: OK %v, %v", i, clock.Now(), r.OK(), err)
		}
	}
	return clock.Now()
}

// statusJSON runs status -json on clock and returns its report.
func statusJSON(t *testing.T, e *env, clock func() time.Time, args ...string) report {
	t.Helper()
	code, out, errs := cmd(t, clock, append([]string{"status", "-json", "-redis", e.url}, args...)...)
	if code != 0 || errs != "" {
		t.Fatalf("status -json: exit %d, stderr %q", code, errs)
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestForecastOfASteadySpender: processes spend a calendar day and a
// sliding window at a steady pace on a clock the test moves; status's
// forecast of when each is spent is within 5% (of the time from now) of
// the instant the same pace really spends it, and says so in words.
func TestForecastOfASteadySpender(t *testing.T) {
	e := newEnv(t)
	la := pacific(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		lim   quota.Limit
		start time.Time
		units int64
		every time.Duration
		calls int
		// want is when the pace, kept up, spends the window: the call
		// that brings its count to the limit.
		want time.Time
		text string
	}{
		// 5 units every 10 s from 08:00 Pacific: 3600 by 10:00, and the
		// 6400 left take 1280 more calls, the last at 13:33:20. (The log
		// counts by slices of 86.4 s: the hour's rate is a little high.)
		{"day", quota.PerDay(10000, la), time.Date(2026, 11, 26, 8, 0, 10, 0, la), 5, 10 * time.Second, 720,
			time.Date(2026, 11, 26, 13, 33, 20, 0, la), "at this rate, spent at 13:32 PST, 10h27m before the reset"},
		// 2 units a second in a 10-minute window: 400 in 200 s, and the
		// 1000th unit 300 s later, long before the first leaves.
		{"sliding", quota.PerWindow(1000, 10*time.Minute), time.Date(2026, 11, 26, 12, 0, 1, 0, time.UTC), 2, time.Second, 200,
			time.Date(2026, 11, 26, 12, 8, 20, 0, time.UTC), "at this rate, spent at 12:08:20 UTC, 1m41s before units come back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New(tt.start)
			lim := e.limiter(t, clock.Now)
			scope := "steady-" + tt.name
			now := steady(t, lim, clock, scope, tt.units, tt.every, tt.calls, tt.lim)
			if err := lim.Describe(ctx, quota.Description{Scope: scope, Bucket: "pool", Limits: []quota.Limit{tt.lim}}); err != nil {
				t.Fatal(err)
			}
			r := statusJSON(t, e, clock.Now, "-scope", scope)
			f := r.Scopes[0].Buckets[0].Windows[0].Forecast
			if f == nil || f.SpentAt == nil {
				t.Fatalf("forecast %+v, want a SpentAt", f)
			}
			truth := tt.want.Sub(now)
			if off := f.SpentAt.Sub(tt.want); off.Abs() > truth/20 {
				t.Errorf("forecast spent at %v, truly at %v: off by %v, more than 5%% of %v", f.SpentAt, tt.want, off, truth)
			}
			if !f.AtRisk || f.Text != tt.text {
				t.Errorf("forecast at risk %v, %q; want true, %q", f.AtRisk, f.Text, tt.text)
			}
			t.Logf("%s: forecast %v, truth %v (off by %v of %v from now); rate %.3g/s over %s",
				tt.name, f.SpentAt.In(la), tt.want.In(la), f.SpentAt.Sub(tt.want), truth, f.Rate, f.Span)
		})
	}
}

// TestForecastOfATokenBucket: a token bucket's forecast is at the rate
// the processes report they spend it (internal/spend): unknown without
// reports, and with two processes' reports summed, whether it outruns
// the refill.
func TestForecastOfATokenBucket(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lim := e.limiter(t, nil)
	rpm := quota.TokenBucket(600, 60, time.Minute) // refills 1 a second
	if _, err := lim.Allow(ctx, "models", quota.Demand{Bucket: "pool", Units: 100, Limits: []quota.Limit{rpm}}); err != nil {
		t.Fatal(err)
	}
	if err := lim.Describe(ctx, quota.Description{Scope: "models", Bucket: "pool", Limits: []quota.Limit{rpm}}); err != nil {
		t.Fatal(err)
	}
	forecastOf := func() *forecastReport {
		t.Helper()
		r := statusJSON(t, e, nil)
		return r.Scopes[0].Buckets[0].Windows[0].Forecast
	}
	if f := forecastOf(); f == nil || !f.RateUnknown || f.AtRisk || !strings.Contains(f.Text, "rate of spending is unknown") {
		t.Errorf("without reports: %+v; want the rate unknown, not at risk", f)
	}
	c := redis.NewClient(&redis.Options{Addr: e.server.Addr})
	t.Cleanup(func() { c.Close() })
	report := func(process string, units int64) {
		t.Helper()
		r, err := spend.New(c, spend.Options{Process: process, Span: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r.Spend("models", "pool", "messages", "", units)
		if err := r.Flush(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	report("a", 30) // 0.5 a second: the refill keeps up
	if f := forecastOf(); f == nil || f.RateUnknown || f.AtRisk || f.Rate != 0.5 || !strings.Contains(f.Text, "keeps up with spending 0.5/s") {
		t.Errorf("one process at 0.5/s: %+v; want a rate of 0.5, not at risk", f)
	}
	report("b", 90) // 2 a second in all: the level falls 1 a second
	f := forecastOf()
	if f == nil || !f.AtRisk || f.Rate != 2 || f.SpentAt == nil || !strings.Contains(f.Text, "spending 2/s outruns the refill of 1/s") {
		t.Fatalf("two processes at 2/s: %+v; want at risk, empty in about 500 s", f)
	}
	if d := f.SpentAt.Sub(time.Now()); d < 490*time.Second || d > 501*time.Second {
		t.Errorf("empty in %v, want about 500 s (a level of 500 falling 1 a second)", d)
	}
}

// TestStatusCheck: status -check's four exit statuses, its lines, and
// one clear line on stderr for bad input.
func TestStatusCheck(t *testing.T) {
	e := newEnv(t)
	la := pacific(t)
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 26, 8, 0, 10, 0, la))
	lim := e.limiter(t, clock.Now)
	day := quota.PerDay(10000, la)
	// A quiet scope, and (below) a scope spent fast.
	steady(t, lim, clock, "quiet", 1, time.Minute, 10, day)
	if err := lim.Describe(ctx, quota.Description{Scope: "quiet", Bucket: "pool", Limits: []quota.Limit{day}}); err != nil {
		t.Fatal(err)
	}
	empty := newEnv(t)
	tests := []struct {
		name     string
		setup    func()
		args     []string
		code     int
		out, err string
	}{
		{"nothing at risk", nil, []string{"-redis", e.url}, 0, "", ""},
		{"at risk", func() {
			steady(t, lim, clock, "burning", 50, 10*time.Second, 100, day)
			if err := lim.Describe(ctx, quota.Description{Scope: "burning", Bucket: "pool", Limits: []quota.Limit{day}}); err != nil {
				t.Fatal(err)
			}
		}, []string{"-redis", e.url},
			1, "scope burning bucket pool day America/Los_Angeles: at this rate, spent at 09:25 PST, 14h34m before the reset\n", ""},
		{"one scope, not at risk", nil, []string{"-redis", e.url, "-scope", "quiet"}, 0, "", ""},
		{"with -json", nil, []string{"-redis", e.url, "-json"}, 2, "",
			"tollgate: status: -check prints a line per window at risk: it takes neither -watch nor -json\n"},
		{"with -watch", nil, []string{"-redis", e.url, "-watch"}, 2, "",
			"tollgate: status: -check prints a line per window at risk: it takes neither -watch nor -json\n"},
		{"-check=maybe", nil, []string{"-redis", e.url, "-check=maybe"}, 2, "",
			"tollgate: status: invalid boolean value \"maybe\" for -check: parse error\n"},
		{"no Redis given", nil, nil, 2, "", "tollgate: no Redis: give -redis URL or set TOLLGATE_REDIS\n"},
		{"Redis unreachable", nil, []string{"-redis", "redis://127.0.0.1:1"}, 3, "", "tollgate: status -check: could not check: redis at redis://127.0.0.1:1 does not answer"},
		{"no tollgate keys", nil, []string{"-redis", empty.url}, 3, "", "tollgate: status -check: could not check: no tollgate keys under prefix \"tollgate:\""},
		{"unknown scope", nil, []string{"-redis", e.url, "-scope", "nope"}, 3, "", "tollgate: status -check: could not check: unknown scope \"nope\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			code, out, errs := cmd(t, clock.Now, append([]string{"status", "-check"}, tt.args...)...)
			if code != tt.code || out != tt.out || !strings.HasPrefix(errs, tt.err) || strings.Count(errs, "\n") > 1 || (tt.err == "") != (errs == "") {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, stderr starting %q (one line)", code, out, errs, tt.code, tt.out, tt.err)
			}
		})
	}
}
