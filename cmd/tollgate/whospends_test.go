package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/spend"
)

// spender is a process's who-spends recorder writing to the env's Redis,
// as a Transport's does, flushed once now: it spends units of pool in
// project-a on each endpoint of spent, for caller, and has waits requests
// waiting since the instants given.
func (e *env) spender(t *testing.T, process, caller string, spent map[string]int64, waits ...time.Time) {
	t.Helper()
	r, err := spend.New(e.server.Client(t), spend.Options{Process: process, Interval: time.Second, Span: time.Minute, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for endpoint, units := range spent {
		r.Spend("project-a", "pool", endpoint, caller, units)
	}
	for _, since := range waits {
		w := r.BeginWait("project-a", "pool", caller, since)
		t.Cleanup(w.End)
	}
	if err := r.Flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestWebWhoSpends: the page shows each bucket's top spenders from two
// processes' reports, most first, with the endpoint most of their units
// went to, and the requests waiting for room with the oldest wait.
func TestWebWhoSpends(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")
	e.spender(t, "ingest-7@host1", "", map[string]int64{"search.list": 1200, "items.list": 30}, time.Now().Add(-42*time.Second))
	e.spender(t, "cron@host2", "php-cron", map[string]int64{"items.list": 300})

	base, _ := startWeb(t, e, "")
	_, page := fetch(t, base+"/")
	i := strings.Index(page, `data-bucket="pool"`)
	if i < 0 {
		t.Fatalf("no bucket pool on the page:\n%s", page)
	}
	pool := page[i:]
	pool = pool[:strings.Index(pool, "</article>")]
	top := regexp.MustCompile(`<caption>top spenders, units in the last 1m0s</caption>.*\n` +
		`<tr><td>ingest-7@host1</td><td>1230</td><td>search.list</td></tr><tr><td>php-cron via cron@host2</td><td>300</td><td>items.list</td></tr></table>`)
	if !top.MatchString(pool) {
		t.Errorf("bucket pool does not show its two spenders, most first:\n%s", pool)
	}
	if !regexp.MustCompile(`1 request waiting for room, the oldest for 4[2-9]s`).MatchString(pool) {
		t.Errorf("bucket pool does not show the request waiting for 42s:\n%s", pool)
	}
	if n := strings.Count(page, "top spenders"); n != 1 {
		t.Errorf("%d tables of spenders, want 1: the reports name bucket pool alone", n)
	}
}
