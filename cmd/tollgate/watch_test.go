package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestWatchPlainWhenNotATerminal: with stdout not a terminal, -watch
// writes one report after the other, with no terminal control codes.
func TestWatchPlainWhenNotATerminal(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 1)
	described(t, lim, "pool", "project-a")
	code, out, errs := cmd(t, nil, "status", "-watch", "-every", "100ms", "-frames", "3", "-redis", e.url)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if n := strings.Count(out, "tollgate status at"); n != 3 || strings.Contains(out, "\x1b") || strings.Count(out, "1 / 9500") != 3 {
		t.Errorf("%d reports, escapes %v, in\n%s\nwant 3 plain reports", n, strings.Contains(out, "\x1b"), out)
	}
}

// TestWatchInATerminal runs status -watch in a real terminal (a tmux
// pane): the screen is redrawn in place as units are spent, and an
// interrupt ends it with status 0, leaving the screen as it was.
func TestWatchInATerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv(redistest.RequireEnv) != "" {
			t.Fatalf("tmux is not installed and %s is set: %v", redistest.RequireEnv, err)
		}
		t.Skipf("tmux is not installed (set %s to make this a failure)", redistest.RequireEnv)
	}
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 1)
	described(t, lim, "pool", "project-a")
	bin := program(t)

	// A tmux server of the test's own, without the user's configuration.
	sock := filepath.Join(t.TempDir(), "tmux")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The shell writes the command's exit status down; its trap keeps it
	// alive through the interrupt (a trap, unlike an ignored signal, is
	// not passed on to the command).
	exited := filepath.Join(t.TempDir(), "exited")
	run("new-session", "-d", "-s", "watch", "-x", "120", "-y", "30",
		"trap true INT; "+bin+" status -watch -every 200ms -redis "+e.url+"; echo $? > "+exited,
		";", "set-option", "-t", "watch", "remain-on-exit", "on")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	screen := func(want string) string {
		t.Helper()
		var s string
		for range 100 {
			if s = run("capture-pane", "-p", "-t", "watch"); strings.Contains(s, want) {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("after 10s the screen does not show %q:\n%s", want, s)
		return ""
	}

	s := screen("1 / 9500")
	if !strings.Contains(s, "scope project-a") || !strings.Contains(s, "[#...................]") {
		t.Errorf("the screen:\n%s", s)
	}
	// Units spent elsewhere show at the next redraw, in place.
	if code, _, errs := cmd(t, nil, "spend", "-scope", "project-a", "-bucket", "pool", "-units", "40", "-redis", e.url); code != 0 {
		t.Fatalf("spend: %s", errs)
	}
	s = screen("41 / 9500")
	if n := strings.Count(s, "tollgate status at"); n != 1 {
		t.Errorf("%d reports on the screen, want 1 redrawn in place:\n%s", n, s)
	}

	run("send-keys", "-t", "watch", "C-c")
	var status []byte
	for range 100 {
		if status, err = os.ReadFile(exited); err == nil && len(status) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := strings.TrimSpace(string(status)); got != "0" {
		t.Fatalf("after an interrupt, exit status %q (%v), want 0", got, err)
	}
	if s := run("capture-pane", "-p", "-t", "watch"); strings.Contains(s, "tollgate status at") {
		t.Errorf("the report stayed on the screen after exit; want the screen as it was:\n%s", s)
	}
}
