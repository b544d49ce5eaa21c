package youtube

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
)

// FuzzUpstream feeds the error reader arbitrary bodies and statuses: it must
// never panic, must leave the body whole for the caller, and may only call
// a response spent for a 403 or a 429.
//
//	go test ./providers/youtube -run '^$' -fuzz FuzzUpstream -fuzztime 5m
func FuzzUpstream(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(403, "", b)
	}
	// The API's own bodies, one per reason, with the status each is sent
	// with; and each under a 403, as a quota reason may come.
	files, _ = filepath.Glob(simErrors + "*.json")
	if len(files) == 0 {
		f.Fatalf("no error bodies in %s", simErrors)
	}
	for _, name := range files {
		status, body := apiFixture(f, strings.TrimSuffix(filepath.Base(name), ".json"))
		f.Add(status, "", []byte(body))
		f.Add(403, "", []byte(body))
	}
	f.Add(429, "120", []byte("<html>slow down</html>"))
	f.Add(403, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{"error":{"errors":[{"reason":"userRateLimitExceeded"}]}}`))
	f.Add(403, "-1", []byte(`{"error":{"details":[{"reason":"RATE_LIMIT_EXCEEDED"}]}}`))
	read := Upstream(NextReset)
	e := costs.Endpoint{Name: "videos.list", Charges: []costs.Charge{{Bucket: Pool, Units: 1}}}
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}}, Body: io.NopCloser(bytes.NewReader(body))}
		v := read(resp, e)
		if v.Spent && status != 403 && status != 429 {
			t.Fatalf("status %d read as spent", status)
		}
		if v.Spent && (v.Pause <= 0 || v.Pause > 366*24*time.Hour) {
			t.Fatalf("pause %v", v.Pause)
		}
		rest, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(rest, body) {
			t.Fatalf("the body was not left whole")
		}
	})
}
