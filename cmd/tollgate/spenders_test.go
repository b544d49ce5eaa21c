package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/internal/testclock"
)

// TestStatusSpenders: two processes report what they spend of a scope;
// status shows, under the bucket, the top spenders, the waiting requests
// and the oldest wait, the refusals by cause and the would-be refusals of
// shadow mode, as text and as JSON; the scope's pause refusals under the
// scope.
func TestStatusSpenders(t *testing.T) {
	e := newEnv(t)
	clock := testclock.New(time.Date(2026, 11, 2, 17, 0, 0, 0, time.UTC))
	one := e.process(t, e.limiter(t, clock.Now), nil)
	e.spend(t, one, "project-a", "/v1/items", 3)
	described(t, e.limiter(t, clock.Now), "pool", "project-a")

	ctx := context.Background()
	recorder := func(name string) *spend.Recorder {
		r, err := spend.New(e.server.Client(t), spend.Options{Process: name})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := recorder("ingest-a/1"), recorder("ingest-b/2")
	a.Spend("project-a", "pool", "items.list", "cron", 300)
	a.Refuse("project-a", "pool", "items.list", "cron", spend.NoRoom)
	a.Refuse("project-a", "pool", "items.list", "cron", spend.WouldRefuse)
	a.Refuse("project-a", "pool", "items.list", "cron", spend.WouldRefuse)
	w := a.BeginWait("project-a", "pool", "cron", clock.Now().Add(-7*time.Second))
	defer w.End()
	b.Spend("project-a", "pool", "items.list", "", 50)
	b.Refuse("project-a", "", "items.list", "", spend.OperatorPause)
	for _, r := range []*spend.Recorder{a, b} {
		if err := r.Flush(ctx, clock.Now()); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errs := cmd(t, clock.Now, "status", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errs)
	}
	for _, line := range []string{
		"\n  refused in the last 1m0s: 1 operator-pause\n",
		"\n    spent 350 in the last 1m0s: ingest-a/1 (cron) 300, ingest-b/2 50\n" +
			"    1 request waiting, the oldest for 7s\n" +
			"    refused in the last 1m0s: 1 no-room\n" +
			"    shadow: would have refused 2 in the last 1m0s\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("status wrote\n%s\nwant it to hold\n%s", out, line)
		}
	}

	code, out, errs = cmd(t, clock.Now, "status", "-json", "-scope", "project-a", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status -json: exit %d, stderr %q", code, errs)
	}
	var got report
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Scopes) != 1 || len(got.Scopes[0].Buckets) == 0 {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	sp := got.Scopes[0].Buckets[0].Spending
	since := clock.Now().Add(-7 * time.Second).UTC()
	if sp == nil || sp.Units != 350 || len(sp.Spenders) != 2 || sp.Spenders[0] != (spenderReport{"ingest-a/1", "cron", 300, "items.list"}) ||
		sp.Waiting != 1 || sp.Since == nil || !sp.Since.Equal(since) ||
		sp.Refused["no-room"] != 1 || sp.Refused["would-refuse"] != 2 || len(sp.Refused) != 2 {
		t.Errorf("the bucket's spending: %+v; want 350 units, ingest-a's 300 (items.list) first, 1 waiting since %v, 1 no-room, 2 would-refuse", sp, since)
	}
	if sp := got.Scopes[0].Spending; sp == nil || sp.Refused["operator-pause"] != 1 {
		t.Errorf("the scope's spending: %+v; want 1 operator-pause", sp)
	}
}
