package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestStatusGolden: processes spend, lease, hold a slot and are paused on
// a fixed clock; status shows it all, as text and as JSON, byte for byte
// as the golden files say.
func TestStatusGolden(t *testing.T) {
	e := newEnv(t)
	// 09:00 Pacific, the day after the clocks went back.
	clock := testclock.New(time.Date(2026, 11, 2, 17, 0, 0, 0, time.UTC))
	ctx := context.Background()

	one := e.process(t, e.limiter(t, clock.Now), nil)
	e.spend(t, one, "project-a", "/v1/items", 30)
	e.spend(t, one, "project-a", "/v1/search", 2)
	held, err := e.get(one, "project-a", "/v1/search") // in flight until its body is closed
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	e.spend(t, one, "team alpha", "/v1/items", 7) // a name keys hold as a hash
	// Another process spends from leases of 50 units.
	two := e.process(t, e.limiter(t, clock.Now), func(cfg *tollgate.Config) {
		cfg.Lease = func(string, string) (int64, time.Duration) { return 50, time.Minute }
	})
	e.spend(t, two, "project-b", "/v1/items", 3)
	// A program of another version decided on a window nobody describes.
	lim := e.limiter(t, clock.Now)
	if _, err := lim.Allow(ctx, "legacy", quota.Demand{Bucket: "pool", Units: 5, Limits: []quota.Limit{quota.PerWindow(100, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	described(t, lim, "pool", "project-a", "team alpha", "project-b")
	described(t, lim, "search", "project-a")

	// The operators act, a few seconds later: less than quota.SlotTTL, on
	// this clock, lest the slot held look expired.
	clock.Add(2 * time.Second)
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "200", "-by", "ops-bob", "-reason", "a backfill outside tollgate"},
			"recorded 200 units spent in bucket \"pool\" of scope \"project-a\", in 2 windows\n"},
		{[]string{"pause", "-scope", "project-a", "-bucket", "search", "-for", "30m", "-reason", "deploy rollback", "-by", "ops-alice"},
			"paused bucket \"search\" of scope \"project-a\" until 17:30:02 UTC (in 30m0s): deploy rollback\n" +
				"the 1 process listening applied it\n"},
		{[]string{"pause", "-scope", "team alpha", "-for", "2h", "-reason", "over budget", "-by", "ops-alice"},
			"paused scope \"team alpha\" until 19:00:02 UTC (in 2h0m0s): over budget\n" +
				"the 1 process listening applied it\n"},
	} {
		code, out, errs := cmd(t, clock.Now, append(step.args, "-redis", e.url)...)
		if code != 0 || out != step.want || errs != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want 0, %q", step.args, code, out, errs, step.want)
		}
	}

	clock.Add(2 * time.Second)
	for _, golden := range []struct {
		file string
		args []string
	}{
		{"status.golden", []string{"status"}},
		{"status.json.golden", []string{"status", "-json"}},
		{"status-project-a.golden", []string{"status", "-scope", "project-a"}},
	} {
		code, out, errs := cmd(t, clock.Now, append(golden.args, "-redis", e.url)...)
		if code != 0 || errs != "" {
			t.Fatalf("%v: exit %d, stderr %q", golden.args, code, errs)
		}
		path := filepath.Join("testdata", golden.file)
		if *update {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("%v wrote\n%s\nwant (%s)\n%s", golden.args, out, path, want)
		}
	}
}

// Windows are shown as configured, not as the Transport lengthened them
// by its Transit (50ms by default): "sliding 1m40s", not "sliding
// 1m40.05s", in text and in JSON.
func TestStatusShowsTheConfiguredWindow(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	tr := e.process(t, lim, func(cfg *tollgate.Config) { cfg.Transit = 0 }) // DefaultTransit
	e.spend(t, tr, "project-a", "/v1/items", 1)
	described(t, lim, "pool", "project-a")
	for _, args := range [][]string{{"status"}, {"status", "-json"}} {
		code, out, errs := cmd(t, nil, append(args, "-redis", e.url)...)
		if code != 0 || errs != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		if !strings.Contains(out, "sliding 1m40s") || strings.Contains(out, "1m40.05s") {
			t.Errorf("%v shows the window lengthened by Transit, or not at all:\n%s", args, out)
		}
	}
}

// Errors of a command name it once: "tollgate: status: ...", never
// "tollgate: tollgate status: ...".
func TestCommandErrorsNameTheCommandOnce(t *testing.T) {
	for _, name := range []string{"status", "pause", "resume", "spend"} {
		for _, args := range [][]string{{name, "extra-arg"}, {name, "-nosuchflag"}} {
			code, out, errs := cmd(t, nil, args...)
			if code != 2 || out != "" || !strings.HasPrefix(errs, "tollgate: "+name+": ") || strings.Count(errs, "tollgate") != 1 {
				t.Errorf("tollgate %s: exit %d, stdout %q, stderr %q; want 2 and one line \"tollgate: %s: ...\"",
					strings.Join(args, " "), code, out, errs, name)
			}
		}
	}
}

// TestStatusTokenBucket: a bucket limited by token buckets beside a
// calendar day shows each bucket's level (what is left), its capacity and
// when it is full again, as text and as JSON, as the golden files say.
func TestStatusTokenBucket(t *testing.T) {
	e := newEnv(t)
	clock := testclock.New(time.Date(2026, 11, 2, 17, 0, 0, 0, time.UTC))
	ctx := context.Background()
	lim := e.limiter(t, clock.Now)
	rpm := quota.TokenBucket(50, 50, time.Minute)
	day := quota.PerDay(1000, pacific(t))
	tokens := quota.TokenBucket(40000, 40000, time.Minute)
	for range 12 {
		r, err := lim.Allow(ctx, "models", quota.Demand{Bucket: "requests", Units: 1, Limits: []quota.Limit{rpm, day}},
			quota.Demand{Bucket: "input-tokens", Units: 1500, Limits: []quota.Limit{tokens}})
		if err != nil || !r.OK() {
			t.Fatalf("Allow: OK=%v err=%v", r.OK(), err)
		}
	}
	err := lim.Describe(ctx,
		quota.Description{Scope: "models", Bucket: "requests", Limits: []quota.Limit{rpm, day}, Quotas: []int64{55, 1000}},
		quota.Description{Scope: "models", Bucket: "input-tokens", Limits: []quota.Limit{tokens}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(6 * time.Second) // 5 requests and 4,000 tokens refilled
	for _, golden := range []struct {
		file string
		args []string
	}{
		{"status-bucket.golden", []string{"status"}},
		{"status-bucket.json.golden", []string{"status", "-json"}},
	} {
		code, out, errs := cmd(t, clock.Now, append(golden.args, "-redis", e.url)...)
		if code != 0 || errs != "" {
			t.Fatalf("%v: exit %d, stderr %q", golden.args, code, errs)
		}
		path := filepath.Join("testdata", golden.file)
		if *update {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("%v wrote\n%s\nwant (%s)\n%s", golden.args, out, path, want)
		}
	}
}
