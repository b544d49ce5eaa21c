package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// built is the command, built once for the tests that run it as a
// program.
var built struct {
	once sync.Once
	path string
	err  error
}

// program builds the command into a temporary directory, once.
func program(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-cmd-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "tollgate")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = errors.New(string(out))
		}
	})
	if built.err != nil {
		t.Fatalf("building the command: %v", built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// TestBadInputOneLineAndExitStatus: run as a program, every kind of bad
// input gets one line on stderr, nothing on stdout, and exit status 2 for
// bad usage or 1 for a command that could not be done; never a stack
// trace, nor go-redis's own log lines, nor a password from the URL.
func TestBadInputOneLineAndExitStatus(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	tr := e.process(t, lim, nil)
	e.spend(t, tr, "project-a", "/v1/items", 1)
	described(t, lim, "pool", "project-a")
	if _, err := lim.Allow(context.Background(), "legacy", quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{quota.PerWindow(10, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	bin := program(t)
	for _, tc := range []struct {
		args []string
		env  string // TOLLGATE_REDIS
		code int
		says string
	}{
		{nil, "", 2, "no command given"},
		{[]string{"frobnicate"}, "", 2, `unknown command "frobnicate"`},
		{[]string{"status"}, "", 2, "no Redis: give -redis URL or set TOLLGATE_REDIS"},
		{[]string{"status", "-watch", "-every", "1ms", "-redis", e.url}, "", 2, "-every 1ms"},
		{[]string{"status", "-nosuchflag"}, "", 2, "status: flag provided but not defined: -nosuchflag"},
		{[]string{"status", "extra"}, "", 2, `tollgate: status: unexpected argument "extra"`},
		{[]string{"status", "-redis", "http://127.0.0.1:1"}, "", 2, "invalid URL scheme"},
		{[]string{"pause", "-scope", "project-a", "-for", "soon", "-reason", "x"}, e.url, 2, `invalid value "soon" for flag -for`},
		{[]string{"pause", "-scope", "project-a", "-for", "-5m", "-reason", "x"}, e.url, 2, "-for must be a positive duration"},
		{[]string{"pause", "-scope", "project-a", "-for", "1m"}, e.url, 2, "-reason is required"},
		{[]string{"pause", "-for", "1m", "-reason", "x"}, e.url, 2, "-scope is required"},
		{[]string{"pause", "-scope", "project-a", "-for", "1m", "-reason", strings.Repeat("x", 201)}, e.url, 2, "at most 200"},
		{[]string{"resume"}, e.url, 2, "-scope is required"},
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "-3"}, e.url, 2, "-units must be a positive count"},
		{[]string{"spend", "-scope", "project-a", "-units", "3"}, e.url, 2, "-scope and -bucket are required"},
		{[]string{"web"}, "", 2, "no Redis: give -redis URL or set TOLLGATE_REDIS"},
		{[]string{"web", "-every", "10ms"}, e.url, 2, "web: -every 10ms: reload at most once a second"},
		{[]string{"web", "-listen", "nonsense"}, e.url, 2, `web: -listen "nonsense": want host:port`},
		{[]string{"web", "-wait", "0s"}, e.url, 2, "web: -wait must be positive"},
		{[]string{"web", "extra"}, e.url, 2, `tollgate: web: unexpected argument "extra"`},
		{[]string{"web", "-listen", e.server.Addr}, e.url, 1, "web: listen tcp " + e.server.Addr + ": bind: address already in use"},
		{[]string{"status", "-redis", "redis://:hunter2@127.0.0.1:1"}, "", 1, "redis at redis://:xxxxx@127.0.0.1:1 does not answer"},
		{[]string{"status", "-prefix", "other:"}, e.url, 1, `no tollgate keys under prefix "other:"`},
		{[]string{"status", "-scope", "project-z"}, e.url, 1, `unknown scope "project-z" under prefix "tollgate:" (found: legacy, project-a)`},
		{[]string{"pause", "-scope", "project-z", "-for", "1m", "-reason", "x"}, e.url, 1, `unknown scope "project-z"`},
		{[]string{"pause", "-scope", "project-a", "-bucket", "poool", "-for", "1m", "-reason", "x"}, e.url, 1, `unknown bucket "poool" in scope "project-a" (found: pool)`},
		{[]string{"spend", "-scope", "legacy", "-bucket", "pool", "-units", "3"}, e.url, 1, "no process described its limits"},
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "500"}, e.url, 1, "quota: "},
	} {
		c := exec.Command(bin, tc.args...)
		c.Env = append(os.Environ(), "TOLLGATE_REDIS="+tc.env)
		var out, errs bytes.Buffer
		c.Stdout, c.Stderr = &out, &errs
		err := c.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		msg := errs.String()
		if code != tc.code || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "tollgate: ") ||
			!strings.Contains(msg, tc.says) || strings.Contains(msg, "hunter2") {
			t.Errorf("tollgate %s: exit %d, stdout %q, stderr %q; want exit %d and one line saying %q",
				strings.Join(tc.args, " "), code, out.String(), msg, tc.code, tc.says)
		}
	}
	// The same Redis through the environment, and nothing wrong.
	c := exec.Command(bin, "status", "-scope", "project-a")
	c.Env = append(os.Environ(), "TOLLGATE_REDIS="+e.url)
	if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), "1 / 9500") {
		t.Errorf("status with TOLLGATE_REDIS: %v\n%s", err, out)
	}
}
