package main

import (
	"context"
	"encoding/json"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestActionsRecorded: pause, resume and spend each leave who (-by, or
// the OS user without it), when, what and why in the record of
// operators' actions; status shows the newest in text and all it read in
// -json; the record stays capped.
func TestActionsRecorded(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	tr := e.process(t, lim, func(cfg *tollgate.Config) {
		cfg.Lease = func(string, string) (int64, time.Duration) { return 20, time.Minute }
	})
	e.spend(t, tr, "project-a", "/v1/items", 3)
	e.spend(t, tr, "project-a", "/v1/search", 1)
	described(t, lim, "pool", "project-a")
	described(t, lim, "search", "project-a")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		args []string
		want ops.Action
	}{
		{[]string{"pause", "-scope", "project-a", "-bucket", "search", "-for", "30m", "-reason", "deploy rollback", "-by", "ops-alice"},
			ops.Action{By: "ops-alice", Via: "cli", What: "pause", Scope: "project-a", Bucket: "search", For: 30 * time.Minute, Why: "deploy rollback"}},
		{[]string{"resume", "-scope", "project-a", "-reason", "rolled back"},
			ops.Action{By: me.Username, Via: "cli", What: "resume", Scope: "project-a", Why: "rolled back"}},
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "40"},
			ops.Action{By: me.Username, Via: "cli", What: "spend", Scope: "project-a", Bucket: "pool", Units: 40}},
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "2", "-by", "Zoë (on call)", "-reason", "a backfill"},
			ops.Action{By: "Zoë (on call)", Via: "cli", What: "spend", Scope: "project-a", Bucket: "pool", Units: 2, Why: "a backfill"}},
	}
	for i, step := range steps {
		before := time.Now()
		code, out, errs := cmd(t, nil, append(step.args, "-redis", e.url)...)
		if code != 0 || errs != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", step.args, code, out, errs)
		}
		got, err := ops.New(lim).Actions(context.Background(), 0)
		if err != nil || len(got) != i+1 {
			t.Fatalf("after %v: %d actions recorded (%v), want %d", step.args, len(got), err, i+1)
		}
		newest := got[0]
		// Redis's clock: within a second of this one's on one machine.
		if newest.At.Before(before.Add(-time.Second)) || newest.At.After(time.Now().Add(time.Second)) {
			t.Errorf("%v: recorded at %v, want about now (%v)", step.args, newest.At, before)
		}
		newest.At = time.Time{}
		if newest != step.want {
			t.Errorf("%v recorded\n%+v\nwant\n%+v", step.args, newest, step.want)
		}
	}

	// status -json: every action it read, newest first.
	code, out, errs := cmd(t, nil, "status", "-json", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status -json: exit %d: %s", code, errs)
	}
	var r struct {
		Actions []actionReport `json:"actions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Actions) != 4 || r.Actions[0].By != "Zoë (on call)" || r.Actions[3].What != "pause" || r.Actions[3].For != "30m0s" ||
		r.Actions[3].Why != "deploy rollback" || r.Actions[1].Units != 40 {
		t.Errorf("status -json's actions: %+v", r.Actions)
	}
	if !strings.Contains(out, `"by": "ops-alice"`) || !strings.Contains(out, `"what": "resume"`) {
		t.Errorf("status -json lacks the actions:\n%s", out)
	}
	// status: a short section, the newest first.
	code, out, _ = cmd(t, nil, "status", "-redis", e.url)
	if i := strings.Index(out, "\noperators' actions, newest first:\n"); code != 0 || i < 0 ||
		!strings.Contains(out[i:], "ops-alice (cli)  pause bucket \"search\" of scope \"project-a\" for 30m0s: deploy rollback\n") ||
		!strings.Contains(out[i:], me.Username+" (cli)  spend 40 units in bucket \"pool\" of scope \"project-a\"\n") {
		t.Errorf("status: exit %d, without the actions as they should read:\n%s", code, out)
	}

	// A long record: text shows the newest five, -json the newest 50;
	// Redis keeps 1000.
	op := ops.New(lim)
	for i := range 1010 {
		if err := op.Record(context.Background(), ops.Action{By: "bot", What: "resume", Scope: "project-a", Why: strings.Repeat("x", i%7)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.server.Client(t).LLen(context.Background(), quota.DefaultPrefix+"actions").Result(); err != nil || n != 1000 {
		t.Errorf("the record holds %d actions (%v), want 1000", n, err)
	}
	_, out, _ = cmd(t, nil, "status", "-redis", e.url)
	if !strings.Contains(out, "operators' actions, newest first (the last 5; -json shows 50):") || strings.Count(out, "  bot  resume scope") != 5 {
		t.Errorf("status with a long record:\n%s", out)
	}
	_, out, _ = cmd(t, nil, "status", "-json", "-redis", e.url)
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Actions) != 50 {
		t.Errorf("status -json with a long record: %d actions (%v), want 50", len(r.Actions), err)
	}
}

// TestByRefused: every bad -by (empty, too long, control characters,
// invalid UTF-8) and bad -reason of resume and spend is one line on
// stderr and exit status 2, before anything is done: no pause, nothing
// spent, nothing recorded.
func TestByRefused(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")
	used := func() int64 {
		u, err := lim.Usage(context.Background(), "project-a", "pool", quota.PerWindow(399, 100*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return u.Used
	}
	was := used()
	for _, tc := range []struct {
		value, says string
	}{
		{"", "-by is empty"},
		{"   ", "-by is empty"},
		{strings.Repeat("a", ops.MaxBy+1), "-by is 65 bytes; at most 64"},
		{"alice\nroot", "-by must be plain text"},
		{"alice\x1b[2J", "-by must be plain text"},
		{"al\xffice", "-by must be plain text"},
	} {
		for _, args := range [][]string{
			{"pause", "-scope", "project-a", "-for", "1m", "-reason", "drill"},
			{"resume", "-scope", "project-a"},
			{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "5"},
		} {
			code, out, errs := cmd(t, nil, append(args, "-by", tc.value, "-redis", e.url)...)
			if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "tollgate: "+args[0]+": "+tc.says) {
				t.Errorf("%s -by %q: exit %d, stdout %q, stderr %q; want 2 and one line saying %q", args[0], tc.value, code, out, errs, tc.says)
			}
		}
	}
	for _, args := range [][]string{
		{"resume", "-scope", "project-a", "-reason", "a\tb"},
		{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "5", "-reason", strings.Repeat("r", 201)},
	} {
		code, out, errs := cmd(t, nil, append(args, "-redis", e.url)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "-reason") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line about -reason", args, code, out, errs)
		}
	}
	if p, err := lim.PauseOf(context.Background(), "project-a", ""); err != nil || !p.Until.IsZero() {
		t.Errorf("a refused pause paused: %+v, %v", p, err)
	}
	if now := used(); now != was {
		t.Errorf("a refused spend spent: %d units used, were %d", now, was)
	}
	if acts, err := ops.New(lim).Actions(context.Background(), 0); err != nil || len(acts) != 0 {
		t.Errorf("refused commands recorded %+v (%v)", acts, err)
	}
}
