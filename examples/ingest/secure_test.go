package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// childArgs, when set in the environment, makes the test binary run the
// example with these arguments (JSON) instead of the tests: a process of
// its own, whose system certificate pool reads SSL_CERT_FILE afresh.
const childArgs = "TOLLGATE_INGEST_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(childArgs); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Exit(3)
		}
		os.Exit(run(context.Background(), args, os.Stdout, os.Stderr, noEnv))
	}
	os.Exit(m.Run())
}

// runChild runs the example in a process of its own with args and the
// extra environment, and returns its exit code, stdout and stderr.
func runChild(t *testing.T, args []string, env ...string) (int, string, string) {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childArgs+"="+string(raw)), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestIngestOverTLSWithACL runs the example against a Redis that speaks
// TLS only, with a certificate from an authority of the test's making, as
// the README's least-privileged user named in the -redis URL: the
// authority given by SSL_CERT_FILE, as a user of a private one would. It
// spends the simulated quota without a refusal, keeps its keys under
// tollgate's prefix, and Redis refuses it nothing. Without the authority,
// or with a wrong password, it stops with one line that shows no password.
func TestIngestOverTLSWithACL(t *testing.T) {
	const password = "ingest-secret"
	srv := redistest.StartWith(t, redistest.Options{Password: "admin-secret", TLS: true})
	srv.SetUser(t, redistest.ACL(t, "tollgate", password, "tollgate:")...)
	window := 500 * time.Millisecond
	sim := ytsim.New(ytsim.Config{Quota: 120, Window: window, Granular: true, SearchQuota: 6})
	api := httptest.NewServer(sim)
	defer api.Close()
	args := func(url string) []string {
		return []string{"-redis", url, "-api", api.URL + "/youtube/v3", "-keys", "tls-key",
			"-quota", "120", "-search-quota", "6", "-window", window.String(), "-duration", "1500ms"}
	}
	trust := "SSL_CERT_FILE=" + srv.CAFile

	code, out, errOut := runChild(t, args(srv.URL("tollgate", password)), trust)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if st := sim.Stats()["tls-key"]; st.QuotaErrors != 0 || st.Units == 0 {
		t.Errorf("the upstream saw %+v; want units spent and no quota error", st)
	}
	keys, err := srv.Client(t).Keys(t.Context(), "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "tollgate:") {
			t.Errorf("key %q is not under tollgate's prefix", k)
		}
	}
	if refused := srv.ACLRefusals(t); len(refused) > 0 {
		t.Errorf("Redis refused the example %d times:\n%s", len(refused), strings.Join(refused, "\n"))
	}

	for _, tc := range []struct {
		name, url, env, want string
	}{
		{"an unknown authority", srv.URL("tollgate", password), "", "certificate"},
		{"a wrong password", srv.URL("tollgate", "wrong-secret"), trust, "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runChild(t, args(tc.url), tc.env)
			// go-redis may log the failed dial on a line of its own first.
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			if code != 1 || !strings.HasPrefix(last, "ingest: redis at ") || !strings.Contains(last, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and a last line saying Redis does not answer: %q\n%s", code, errOut, tc.want, out)
			}
			if strings.Contains(errOut+out, password) || strings.Contains(errOut+out, "wrong-secret") {
				t.Errorf("the output shows a password: %s%s", errOut, out)
			}
		})
	}
}
