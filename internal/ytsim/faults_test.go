package ytsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allFaults is every Fault with the status and domain of its body.
var allFaults = []struct {
	fault  Fault
	status int
	domain string
}{
	{QuotaExceeded, 403, "youtube.quota"},
	{DailyLimitExceeded, 403, "usageLimits"},
	{RateLimitExceeded, 403, "usageLimits"},
	{RateLimitExceeded429, 429, "usageLimits"},
	{UserRateLimitExceeded, 403, "usageLimits"},
	{UploadLimitExceeded, 400, "youtube.video"},
	{UserRequestsExceedRateLimit, 403, "youtube.liveBroadcast"},
	{Forbidden, 403, "global"},
	{InsufficientPermissions, 403, "global"},
}

// TestErrorFixtures: every file in testdata/errors is a Google error body
// whose reason is its name, and has its Fault.
func TestErrorFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(allFaults) {
		t.Errorf("%d fixtures, want one per fault (%d)", len(files), len(allFaults))
	}
	for _, tt := range allFaults {
		raw, err := os.ReadFile("testdata/errors/" + string(tt.fault) + ".json")
		if err != nil {
			t.Errorf("%s: %v", tt.fault, err)
			continue
		}
		var e struct {
			Error struct {
				Code    int
				Message string
				Errors  []struct{ Domain, Reason, Message string }
			}
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Errorf("%s: %v", tt.fault, err)
			continue
		}
		reason, _, _ := strings.Cut(string(tt.fault), "-")
		got := e.Error
		if got.Code != tt.status || got.Message == "" || len(got.Errors) != 1 ||
			got.Errors[0].Reason != reason || got.Errors[0].Domain != tt.domain || got.Errors[0].Message == "" {
			t.Errorf("%s: body %+v, want code %d, a message and one error %s/%s", tt.fault, got, tt.status, tt.domain, reason)
		}
		if bytes.ContainsAny(raw, "<>") {
			t.Errorf("%s: < or > unescaped; Google sends \\u003c and \\u003e", tt.fault)
		}
	}
}

// TestInject: an injected fault answers the next call of its method with
// the fixture's body, compacted, and charges nothing; the call after it is
// served again.
func TestInject(t *testing.T) {
	for _, tt := range allFaults {
		t.Run(string(tt.fault), func(t *testing.T) {
			s, base := start(t, Config{})
			if err := s.Inject("videos.list", tt.fault); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile("testdata/errors/" + string(tt.fault) + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, raw); err != nil {
				t.Fatal(err)
			}
			u := base + "/videos?part=id&chart=mostPopular&key=k"
			resp, body := do(t, http.MethodGet, u, nil)
			if resp.StatusCode != tt.status || !bytes.Equal(body, want.Bytes()) {
				t.Errorf("answer %d %s, want %d %s", resp.StatusCode, body, tt.status, want.Bytes())
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Errorf("Content-Type %q, want application/json; charset=UTF-8", ct)
			}
			wantArrival := Arrival{At: t0, Project: "k", Method: "videos.list", Bucket: Pool, Units: 0, Status: tt.status}
			if a := last(t, s); a != wantArrival {
				t.Errorf("arrival %+v, want %+v", a, wantArrival)
			}
			if status, body := get(t, u); status != 200 {
				t.Errorf("the call after the fault: %d %s, want 200", status, body)
			}
			wantStats := ProjectStats{Requests: 2, Units: 1, WindowUnits: 1}
			if tt.fault == QuotaExceeded {
				wantStats.QuotaErrors = 1
			}
			if got := s.Stats()["k"]; got != wantStats {
				t.Errorf("stats %+v, want %+v", got, wantStats)
			}
		})
	}
}

// TestInjectOrder: faults queue per method, a method's own before those
// for any method; calls the API does not have, and calls without a key,
// leave the queue alone.
func TestInjectOrder(t *testing.T) {
	s, base := start(t, Config{})
	for _, in := range []struct {
		method string
		fault  Fault
	}{
		{"", Forbidden},
		{"search.list", RateLimitExceeded},
		{"search.list", RateLimitExceeded429},
	} {
		if err := s.Inject(in.method, in.fault); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		path       string
		wantStatus int
	}{
		{"/guideCategories?key=k", 404},                  // not a method: no fault taken
		{"/search?part=id", 403},                         // no key: refused as usual
		{"/videos?part=id&chart=mostPopular&key=k", 403}, // the fault for any method
		{"/videos?part=id&chart=mostPopular&key=k", 200},
		{"/search?part=id&key=k", 403}, // search.list's own faults, in order
		{"/search?part=id&key=k", 429},
		{"/search?part=id&key=k", 200},
	}
	for i, st := range steps {
		if status, body := get(t, base+st.path); status != st.wantStatus {
			t.Errorf("step %d %s: status %d, want %d; body %s", i, st.path, status, st.wantStatus, body)
		}
	}
	if err := s.Inject("videos.upload", QuotaExceeded); err == nil {
		t.Error("Inject of an unknown method: no error")
	}
	if err := s.Inject("videos.list", Fault("backendError")); err == nil {
		t.Error("Inject of an unknown fault: no error")
	}
}

// TestInjectUpload: a fault on the call that opens an upload opens no
// session; the chunks of a session already open take no faults.
func TestInjectUpload(t *testing.T) {
	s, base := start(t, Config{})
	root := strings.TrimSuffix(base, "/youtube/v3")
	uri := openSession(t, root, "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k", nil)
	if err := s.Inject("", UploadLimitExceeded); err != nil {
		t.Fatal(err)
	}
	resp, _ := put(t, uri, http.MethodPost, "bytes 0-9/*", true, 10)
	checkIncomplete(t, resp, true, 10)
	resp, body := send(t, http.MethodPost, root+"/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k", nil, nil)
	if code, r := reason(t, body); resp.StatusCode != 400 || code != 400 || r != "uploadLimitExceeded" || resp.Header.Get("Location") != "" {
		t.Errorf("opening: %d %s (Location %q), want 400 uploadLimitExceeded and no session", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	if st := s.Stats()["k"]; st.Requests != 2 || st.Units != DefaultVideosInsertUnits {
		t.Errorf("stats %+v, want 2 calls, the first one charged", st)
	}
}
