package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// TestStatusUsedIsSpent: a window of 10 units per 100s is spent, and
// five requests wait for room, holding 5 units dated when it frees up.
// status -json's used is what was spent (10, never above the limit), held
// the 5 held apart; the text and the page say "10 / 10 spent" and the
// units held for waiting requests apart, and the page's percentage is of
// what was spent.
func TestStatusUsedIsSpent(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{}, 16)
	tr := e.process(t, e.limiter(t, nil), func(cfg *tollgate.Config) {
		cfg.Buckets = map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerWindow(10, 100*time.Second)}},
			"search": {Limits: []quota.Limit{quota.PerDay(100, pacific(t))}},
		}
		cfg.Policy = func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{MaxWait: 5 * time.Minute} }
		cfg.Trace.WaitStarted = func(context.Context, tollgate.Decision) { started <- struct{}{} }
	})
	e.spend(t, tr, "jobs", "/v1/items", 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 5 {
		go func() {
			req, err := http.NewRequestWithContext(ctx, "GET", e.upstream.URL+"/v1/items", nil)
			if err != nil {
				return
			}
			req.Header.Set("X-Project", "jobs")
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for i := range 5 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("after 10s, %d of 5 requests wait", i)
		}
	}
	described(t, e.limiter(t, nil), "pool", "jobs")

	code, out, errs := cmd(t, nil, "status", "-scope", "jobs", "-json", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status -json: exit %d, stderr %q", code, errs)
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	w := r.Scopes[0].Buckets[0].Windows[0]
	if w.Used != 10 || w.Held != 5 || w.Limit != 10 || w.Remaining != 0 {
		t.Errorf("status -json: used %d, held %d, limit %d, remaining %d; want 10 spent, 5 held apart, limit 10, 0 left", w.Used, w.Held, w.Limit, w.Remaining)
	}

	code, out, errs = cmd(t, nil, "status", "-scope", "jobs", "-redis", e.url)
	if code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errs)
	}
	if !regexp.MustCompile(`sliding 1m40s +\[#{20}\] +10 / 10 spent +0 left, 5 held for (5 )?waiting requests`).MatchString(out) {
		t.Errorf("status says:\n%s\nwant the window 10 / 10 spent, 5 held for waiting requests apart", out)
	}

	page, _ := startWeb(t, e, "")
	_, body := fetch(t, page+"/")
	if !strings.Contains(body, `<span class="used-limit">10 / 10 spent</span> (100%)`) || !regexp.MustCompile(`5 held for (5 )?waiting requests`).MatchString(body) {
		t.Errorf("the page does not show 10 / 10 spent (100%%) with 5 held apart:\n%s", body)
	}
}
