package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// waited is when a request that waited ended, and its error.
type waited struct {
	at  time.Time
	err error
}

// sendWaiters sends n requests through each of trs, all at once, and
// returns when each waits where pauses and resumes reach it (started
// counts the waits the processes report); what it returns receives each
// request's end.
func (e *env) sendWaiters(t *testing.T, trs []*tollgate.Transport, n int, started chan struct{}) <-chan waited {
	t.Helper()
	done := make(chan waited, n*len(trs))
	for _, tr := range trs {
		for range n {
			go func() {
				resp, err := e.get(tr, "jobs", "/v1/items")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				done <- waited{time.Now(), err}
			}()
		}
	}
	for i := range n * len(trs) {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("after 10s, %d of %d requests wait", i, n*len(trs))
		}
	}
	return done
}

// TestResumeReleasesWaiters: two processes have requests waiting behind
// an operator's pause of 30s. A resume, from the command and then from
// the page, reaches them as the pause did: they give their holds back and
// decide again, so each is served within a second of the resume, not
// when the pause would have ended; and the command counts both processes
// among those that applied it.
func TestResumeReleasesWaiters(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{}, 64)
	var trs []*tollgate.Transport
	for range 2 {
		trs = append(trs, e.process(t, e.limiter(t, nil), func(cfg *tollgate.Config) {
			cfg.Policy = func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{MaxWait: time.Minute} }
			cfg.Trace.WaitStarted = func(context.Context, tollgate.Decision) { started <- struct{}{} }
		}))
	}
	e.spend(t, trs[0], "jobs", "/v1/items", 1)
	described(t, e.limiter(t, nil), "pool", "jobs")
	const n = 4 // requests waiting in each process

	served := func(t *testing.T, how string, done <-chan waited, resumed time.Time) {
		t.Helper()
		for range n * len(trs) {
			select {
			case w := <-done:
				if w.err != nil {
					t.Errorf("resumed %s: a waiting request failed: %v", how, w.err)
				} else if late := w.at.Sub(resumed); late > time.Second {
					t.Errorf("resumed %s: a waiting request was served %v after the resume, want within 1s", how, late)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("resumed %s: requests still waiting 5s after the resume (the pause had 30s to run)", how)
			}
		}
	}

	// From the command.
	if code, out, errs := cmd(t, nil, "pause", "-scope", "jobs", "-for", "30s", "-reason", "key rotation", "-redis", e.url); code != 0 {
		t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	done := e.sendWaiters(t, trs, n, started)
	resumed := time.Now()
	code, out, errs := cmd(t, nil, "resume", "-scope", "jobs", "-redis", e.url)
	if code != 0 || errs != "" || !strings.Contains(out, "all 2 processes listening applied it") {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	served(t, "from the command", done, resumed)

	// From the page.
	const token = "op-secret-5c1e"
	page, _ := startWeb(t, e, token)
	if code, out, errs := cmd(t, nil, "pause", "-scope", "jobs", "-for", "30s", "-reason", "key rotation", "-redis", e.url); code != 0 {
		t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	done = e.sendWaiters(t, trs, n, started)
	_, body := fetch(t, page+"/")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form token in the page:\n%s", body)
	}
	form := url.Values{"csrf": {m[1]}, "token": {token}, "by": {"alice"}, "scope": {"jobs"}}
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resumed = time.Now()
	resp, err := client.PostForm(page+"/resume", form)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume from the page: status %d: %s", resp.StatusCode, msg)
	}
	served(t, "from the page", done, resumed)
}
