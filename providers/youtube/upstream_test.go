package youtube

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
)

// fixture reads a body of this package's testdata.
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// simErrors is where the simulator keeps the error bodies of the API, one
// per reason; the tests read them as the API sends them.
const simErrors = "../../internal/ytsim/testdata/errors/"

// apiFixture reads the API's error body for a reason (a file of
// simErrors), and the status its code field gives.
func apiFixture(t testing.TB, name string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(simErrors + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Error struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Error.Code == 0 {
		t.Fatalf("%s: not an error body: %v", name, err)
	}
	return head.Error.Code, string(b)
}

func TestUpstream(t *testing.T) {
	search := costs.Endpoint{Name: "search.list", Charges: []costs.Charge{{Bucket: Search, Units: 1}}}
	chunk := costs.Endpoint{Name: "videos.upload", Free: true, Continues: true}
	midnight := func(now time.Time) time.Time { return now.Add(3 * time.Hour) }
	read := Upstream(midnight)
	api := func(name string) string {
		_, body := apiFixture(t, name)
		return body
	}
	cases := []struct {
		name       string
		endpoint   costs.Endpoint
		status     int
		retryAfter string
		body       string
		spent      bool
		buckets    []string
		pause      time.Duration
		reason     string // Verdict.Reason: "" leaves the status code to name it
	}{
		// The day: the endpoint's buckets, until the reset.
		{"quotaExceeded", search, 403, "", api("quotaExceeded"), true, []string{Search}, 3 * time.Hour, "quotaExceeded"},
		{"dailyLimitExceeded", search, 403, "", api("dailyLimitExceeded"), true, []string{Search}, 3 * time.Hour, "dailyLimitExceeded"},
		{"quotaExceeded on a free request", chunk, 403, "", api("quotaExceeded"), true, []string{Pool}, 3 * time.Hour, "quotaExceeded"},
		// A short pause of the whole project.
		{"rateLimitExceeded", search, 403, "", api("rateLimitExceeded"), true, nil, DefaultRatePause, "rateLimitExceeded"},
		{"rateLimitExceeded as a 429", search, 429, "", api("rateLimitExceeded-429"), true, nil, DefaultRatePause, "rateLimitExceeded"},
		{"userRateLimitExceeded", search, 403, "", api("userRateLimitExceeded"), true, nil, DefaultRatePause, "userRateLimitExceeded"},
		{"userRateLimitExceeded with Retry-After", search, 403, "7", api("userRateLimitExceeded"), true, nil, 7 * time.Second, "userRateLimitExceeded"},
		{"userRequestsExceedRateLimit", search, 403, "", api("userRequestsExceedRateLimit"), true, nil, DefaultRatePause, "userRequestsExceedRateLimit"},
		{"429 RESOURCE_EXHAUSTED", search, 429, "", fixture(t, "resourceExhausted.json"), true, nil, DefaultRatePause, "RATE_LIMIT_EXCEEDED"},
		{"429 with an HTML body", search, 429, "30", fixture(t, "html.txt"), true, nil, 30 * time.Second, ""},
		// Not the project's quota: the channel's upload limit is the
		// Transport's to read (TestUploadLimitPausesTheCredential).
		{"uploadLimitExceeded", search, 400, "", api("uploadLimitExceeded"), false, nil, 0, ""},
		// Not quota at all.
		{"forbidden", search, 403, "", api("forbidden"), false, nil, 0, ""},
		{"forbidden, youtube.common", search, 403, "", fixture(t, "forbidden-youtube.common.json"), false, nil, 0, ""},
		{"insufficientPermissions", search, 403, "", api("insufficientPermissions"), false, nil, 0, ""},
		{"commentsDisabled", search, 403, "", fixture(t, "commentsDisabled.json"), false, nil, 0, ""},
		{"403 HTML", search, 403, "", fixture(t, "html.txt"), false, nil, 0, ""},
		{"truncated JSON", search, 403, "", fixture(t, "truncated.json"), false, nil, 0, ""},
		{"empty 403", search, 403, "", "", false, nil, 0, ""},
		{"quotaExceeded text on a 200", search, 200, "", api("quotaExceeded"), false, nil, 0, ""},
		{"quotaExceeded text on a 500", search, 500, "", api("quotaExceeded"), false, nil, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: c.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(c.body))}
			if c.retryAfter != "" {
				resp.Header.Set("Retry-After", c.retryAfter)
			}
			v := read(resp, c.endpoint)
			if v.Spent != c.spent || !slices.Equal(v.Buckets, c.buckets) {
				t.Errorf("verdict = %+v, want spent=%v buckets=%v", v, c.spent, c.buckets)
			}
			if v.Reason != c.reason {
				t.Errorf("reason = %q, want %q", v.Reason, c.reason)
			}
			if c.spent && (v.Pause < c.pause-time.Second || v.Pause > c.pause) {
				t.Errorf("pause = %v, want %v", v.Pause, c.pause)
			}
			rest, _ := io.ReadAll(resp.Body)
			if string(rest) != c.body {
				t.Errorf("the caller reads %q, want the body whole", rest)
			}
		})
	}
}

func TestReasons(t *testing.T) {
	for _, c := range []struct {
		fixture string
		want    []string
	}{
		{"quotaExceeded", []string{"quotaExceeded"}},
		{"uploadLimitExceeded", []string{"uploadLimitExceeded"}},
		{"userRequestsExceedRateLimit", []string{"userRequestsExceedRateLimit"}},
	} {
		_, body := apiFixture(t, c.fixture)
		if got := reasons([]byte(body)); !slices.Equal(got, c.want) {
			t.Errorf("reasons(%s) = %v, want %v", c.fixture, got, c.want)
		}
	}
	if got := reasons([]byte(fixture(t, "resourceExhausted.json"))); !slices.Equal(got, []string{"RATE_LIMIT_EXCEEDED"}) {
		t.Errorf("reasons(resourceExhausted) = %v, want [RATE_LIMIT_EXCEEDED]", got)
	}
	for _, bad := range []string{"", "null", "[]", `{"error":"quotaExceeded"}`, fixture(t, "html.txt")} {
		if got := reasons([]byte(bad)); len(got) != 0 {
			t.Errorf("reasons(%.20q) = %v, want none", bad, got)
		}
	}
}

func TestNextReset(t *testing.T) {
	la := Pacific()
	cases := []struct {
		now, want time.Time
		day       time.Duration
	}{
		{time.Date(2026, 3, 5, 9, 30, 0, 0, la), time.Date(2026, 3, 6, 0, 0, 0, 0, la), 14*time.Hour + 30*time.Minute},
		{time.Date(2026, 3, 8, 0, 0, 0, 0, la), time.Date(2026, 3, 9, 0, 0, 0, 0, la), 23 * time.Hour},
		{time.Date(2026, 11, 1, 0, 0, 0, 0, la), time.Date(2026, 11, 2, 0, 0, 0, 0, la), 25 * time.Hour},
		{time.Date(2026, 11, 1, 23, 59, 59, 0, la), time.Date(2026, 11, 2, 0, 0, 0, 0, la), time.Second},
		// 07:59 UTC is still the previous day in Los Angeles.
		{time.Date(2026, 7, 1, 6, 59, 0, 0, time.UTC), time.Date(2026, 7, 1, 0, 0, 0, 0, la), time.Minute},
	}
	for _, c := range cases {
		got := NextReset(c.now)
		if !got.Equal(c.want) || got.Sub(c.now) != c.day {
			t.Errorf("NextReset(%v) = %v (in %v), want %v (in %v)", c.now, got, got.Sub(c.now), c.want, c.day)
		}
	}
}
