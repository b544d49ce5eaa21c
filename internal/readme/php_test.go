package readme

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPHPSnippetExitStatus runs docs/gateway.md's PHP snippet against a
// stand-in gateway: a 200 prints the titles and exits 0; a 429, a 401, or
// no gateway at all exits non-zero, so that cron sees the failure.
func TestPHPSnippetExitStatus(t *testing.T) {
	php, err := exec.LookPath("php")
	if err != nil {
		t.Skip("no php on PATH (Debian: apt-get install php-cli php-curl)")
	}
	var code string
	for _, b := range pageBlocks(t, "docs/gateway.md") {
		if b.lang == "php" {
			code = b.code
		}
	}
	if code == "" {
		t.Fatal("docs/gateway.md has no PHP block")
	}
	const gateway = "http://127.0.0.1:8787"
	if !strings.Contains(code, gateway) {
		t.Fatalf("the PHP block does not call %s", gateway)
	}
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write([]byte(`{"items": [{"snippet": {"title": "A video"}}]}`))
		} else {
			w.Write([]byte(`{"error": {"code": 429}}`))
		}
	}))
	defer srv.Close()
	run := func(url string) (string, int) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "cron.php")
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(code, gateway, url)), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, php, file).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("php: %v\n%s", err, out)
		return "", 0
	}
	if out, code := run(srv.URL); code != 0 || out != "A video\n" {
		t.Errorf("a 200: exit %d, printed %q; want exit 0 and the title", code, out)
	}
	for _, s := range []int{http.StatusTooManyRequests, http.StatusUnauthorized} {
		status = s
		if out, code := run(srv.URL); code == 0 || !strings.Contains(out, "not now") {
			t.Errorf("a %d: exit %d, printed %q; want a non-zero exit", s, code, out)
		}
	}
	if out, code := run("http://127.0.0.1:" + "1"); code == 0 {
		t.Errorf("no gateway: exit %d, printed %q; want a non-zero exit", code, out)
	}
}
