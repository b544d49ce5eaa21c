package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// TestStatusShowsProcessesThatExited: three cron runs each spend 2 units
// and one is refused during a pause of the bucket, then close, within a
// second, long before a writer's interval. status's spenders for the span
// name each of them with what it spent, and count the three refusals: a
// Transport writes what it spent when it closes, and its record ages out
// with the span instead of being deleted.
func TestStatusShowsProcessesThatExited(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	for i := range 3 {
		tr := e.process(t, e.limiter(t, nil), func(cfg *tollgate.Config) {
			cfg.Name = fmt.Sprintf("cron/%d", i)
		})
		e.spend(t, tr, "nightly", "/v1/items", 2)
		if i == 0 {
			described(t, lim, "pool", "nightly")
			// The pause names a bucket a process described.
			if err := lim.Describe(context.Background(), quota.Description{Scope: "nightly", Bucket: "search",
				Limits: []quota.Limit{quota.PerDay(100, pacific(t))}}); err != nil {
				t.Fatal(err)
			}
			if code, out, errs := cmd(t, nil, "pause", "-scope", "nightly", "-bucket", "search", "-for", "1h", "-reason", "cron storm", "-redis", e.url); code != 0 {
				t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errs)
			}
		}
		if _, err := e.get(tr, "nightly", "/v1/search"); err == nil {
			t.Fatalf("cron/%d: a search during the bucket's pause was sent", i)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errs := cmd(t, nil, "status", "-json", "-scope", "nightly", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status -json: exit %d, stderr %q", code, errs)
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Scopes) != 1 {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	var pool, search *spendingReport
	for _, b := range r.Scopes[0].Buckets {
		switch b.Bucket {
		case "pool":
			pool = b.Spending
		case "search":
			search = b.Spending
		}
	}
	if pool == nil || pool.Units != 6 || len(pool.Spenders) != 3 {
		t.Fatalf("the pool's spending: %+v; want 6 units, 2 from each of cron/0, cron/1, cron/2\n%s", pool, out)
	}
	for i, s := range pool.Spenders {
		if s.Process != fmt.Sprintf("cron/%d", i) || s.Units != 2 {
			t.Errorf("spender %d: %+v; want cron/%d with 2 units", i, s, i)
		}
	}
	if search == nil || search.Refused["operator-pause"] != 3 {
		t.Errorf("the search bucket's spending: %+v; want 3 refusals by the operator's pause", search)
	}
}
