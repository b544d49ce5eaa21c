package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestWebSaysRedisIsDown: Redis stops answering while the page is served.
// The page (status 503) says so in a sentence, naming the Redis and since
// when, under the prefix it shows, never the client's raw error; once
// Redis is back, the page shows the quotas again.
func TestWebSaysRedisIsDown(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 1)
	described(t, lim, "pool", "project-a")
	page, _ := startWeb(t, e, "")
	if code, _ := fetch(t, page+"/"); code != http.StatusOK {
		t.Fatalf("the page before the outage: status %d", code)
	}
	e.server.Kill()
	code, body := fetch(t, page+"/")
	if code != http.StatusServiceUnavailable {
		t.Errorf("the page during the outage: status %d, want 503", code)
	}
	sentence := regexp.MustCompile(`Redis at redis://127\.0\.0\.1:\d+ does not answer, since \d\d:\d\d:\d\d UTC \(for \d+s\)`)
	if !sentence.MatchString(body) {
		t.Errorf("the page during the outage does not say Redis does not answer, where and since when:\n%s", body)
	}
	for _, raw := range []string{"dial tcp", "quota: ", "connection refused", "prefix <code></code>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the page during the outage shows %q:\n%s", raw, body)
		}
	}
	if !strings.Contains(body, "prefix <code>tollgate:</code>") {
		t.Errorf("the page during the outage does not name its prefix:\n%s", body)
	}
	e.server.Restart(t)
	if code, body := fetch(t, page+"/"); code != http.StatusOK || strings.Contains(body, "does not answer") {
		t.Errorf("the page once Redis is back: status %d:\n%s", code, body)
	}
}
