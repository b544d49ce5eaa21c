package youtube

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUpstream(t *testing.T) {
	search := costs.Endpoint{Name: "search.list", Charges: []costs.Charge{{Bucket: Search, Units: 1}}}
	midnight := func(now time.Time) time.Time { return now.Add(3 * time.Hour) }
	read := Upstream(midnight)
	cases := []struct {
		name       string
		status     int
		retryAfter string
		body       string
		spent      bool
		buckets    []string
		pause      time.Duration
	}{
		{"quotaExceeded", 403, "", fixture(t, "quotaExceeded.json"), true, []string{Search}, 3 * time.Hour},
		{"rateLimitExceeded", 403, "", fixture(t, "rateLimitExceeded.json"), true, nil, DefaultRatePause},
		{"userRateLimitExceeded with Retry-After", 403, "7", fixture(t, "userRateLimitExceeded.json"), true, nil, 7 * time.Second},
		{"429 RESOURCE_EXHAUSTED", 429, "", fixture(t, "resourceExhausted.json"), true, nil, DefaultRatePause},
		{"429 with an HTML body", 429, "30", fixture(t, "html.txt"), true, nil, 30 * time.Second},
		{"forbidden", 403, "", fixture(t, "forbidden.json"), false, nil, 0},
		{"commentsDisabled", 403, "", fixture(t, "commentsDisabled.json"), false, nil, 0},
		{"403 HTML", 403, "", fixture(t, "html.txt"), false, nil, 0},
		{"truncated JSON", 403, "", fixture(t, "truncated.json"), false, nil, 0},
		{"empty 403", 403, "", "", false, nil, 0},
		{"quotaExceeded text on a 200", 200, "", fixture(t, "quotaExceeded.json"), false, nil, 0},
		{"500", 500, "", fixture(t, "quotaExceeded.json"), false, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: c.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(c.body))}
			if c.retryAfter != "" {
				resp.Header.Set("Retry-After", c.retryAfter)
			}
			v := read(resp, search)
			if v.Spent != c.spent || !slices.Equal(v.Buckets, c.buckets) {
				t.Errorf("verdict = %+v, want spent=%v buckets=%v", v, c.spent, c.buckets)
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
	if got := reasons([]byte(fixture(t, "quotaExceeded.json"))); !slices.Equal(got, []string{"quotaExceeded"}) {
		t.Errorf("reasons(quotaExceeded) = %v", got)
	}
	if got := reasons([]byte(fixture(t, "resourceExhausted.json"))); !slices.Equal(got, []string{"RATE_LIMIT_EXCEEDED"}) {
		t.Errorf("reasons(resourceExhausted) = %v", got)
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
