package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// opsACL returns the rules of the README's ACL line for operators, user
// name first, with password: the tests run under the line users copy.
func opsACL(t *testing.T, password string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(redistest.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const start = "ACL SETUSER tollgate-ops "
	var rules []string
	for _, l := range strings.Split(string(text), "\n") {
		if rest, ok := strings.CutPrefix(l, start); ok {
			if rules != nil {
				t.Fatalf("README.md has two lines starting %q", start)
			}
			rules = []string{"tollgate-ops"}
			for _, r := range strings.Fields(rest) {
				if r == ">CHANGE-ME" {
					r = ">" + password
				}
				rules = append(rules, r)
			}
		}
	}
	if rules == nil {
		t.Fatalf("README.md has no line starting %q", start)
	}
	return rules
}

// TestOperatorsUnderACLAndTLS: over TLS, with a Transport logged in as the
// README's ACL user for programs, every command works as the README's
// user for operators, which is the programs' line plus SCAN and PUBSUB
// NUMSUB; Redis refuses nothing. Without the authority the command stops
// in one line, and as the programs' user status names what it lacks.
func TestOperatorsUnderACLAndTLS(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: "admin-secret", TLS: true, Args: keepsEverything})
	app := redistest.ACL(t, "tollgate", "app-secret", quota.DefaultPrefix)
	ops := opsACL(t, "ops-secret")
	same := redistest.ACL(t, "tollgate", "ops-secret", quota.DefaultPrefix) // with the operators' password
	if want := append(slices.Clone(same[1:]), "+scan", "+pubsub|numsub"); !slices.Equal(ops[1:], want) {
		t.Fatalf("the operators' line grants\n%v\nwant the programs' line and +scan +pubsub|numsub:\n%v", ops[1:], want)
	}
	s.SetUser(t, app...)
	s.SetUser(t, ops...)

	e := upstreamOnly(t)
	lim, err := quota.New(s.UserClient(t, "tollgate", "app-secret"))
	if err != nil {
		t.Fatal(err)
	}
	tr := e.process(t, lim, func(cfg *tollgate.Config) {
		cfg.Lease = func(string, string) (int64, time.Duration) { return 20, time.Minute }
	})
	e.spend(t, tr, "project-a", "/v1/items", 3) // from a lease: the process listens
	described(t, lim, "pool", "project-a")

	bin := program(t)
	url := s.URL("tollgate-ops", "ops-secret")
	run := func(trust bool, args ...string) (int, string, string) {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), "TOLLGATE_REDIS="+url)
		if trust {
			c.Env = append(c.Env, "SSL_CERT_FILE="+s.CAFile)
		}
		var out, errs bytes.Buffer
		c.Stdout, c.Stderr = &out, &errs
		err := c.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return c.ProcessState.ExitCode(), out.String(), errs.String()
	}
	for _, step := range []struct {
		args []string
		says string
	}{
		{[]string{"status"}, "20 / 399"},
		{[]string{"spend", "-scope", "project-a", "-bucket", "pool", "-units", "5"}, "recorded 5 units"},
		{[]string{"pause", "-scope", "project-a", "-for", "1m", "-reason", "drill"}, "the 1 process listening applied it"},
		{[]string{"status", "-scope", "project-a", "-json"}, `"reason": "drill"`},
		{[]string{"resume", "-scope", "project-a"}, "1 pause lifted"},
	} {
		code, out, errs := run(true, step.args...)
		if code != 0 || errs != "" || !strings.Contains(out, step.says) {
			t.Errorf("tollgate %s: exit %d, stderr %q, stdout:\n%s\nwant it to say %q", strings.Join(step.args, " "), code, errs, out, step.says)
		}
	}
	if refused := s.ACLRefusals(t); len(refused) > 0 {
		t.Errorf("Redis refused %d times:\n%s", len(refused), strings.Join(refused, "\n"))
	}

	code, out, errs := run(false, "status")
	t.Logf("without the authority: %s", errs)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "certificate") || strings.Contains(errs, "ops-secret") {
		t.Errorf("status without the authority: exit %d, stdout %q, stderr %q; want exit 1 and one line about the certificate", code, out, errs)
	}
	url = s.URL("tollgate", "app-secret")
	code, out, errs = run(true, "status")
	t.Logf("as the programs' user: %s", errs)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "'scan'") || !strings.Contains(errs, "tollgate-ops") {
		t.Errorf("status as the programs' user: exit %d, stdout %q, stderr %q; want exit 1 and one line naming scan and the operators' ACL line", code, out, errs)
	}
}
