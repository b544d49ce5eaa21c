package anthropic_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/anthropic"
)

func TestUpstream(t *testing.T) {
	rate := `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`
	in5s := time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339Nano)
	for _, c := range []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		spent   bool
		buckets []string
		pause   time.Duration // about
	}{
		{"rate limit, retry-after", 429, map[string]string{"Retry-After": "20", "Anthropic-Ratelimit-Output-Tokens-Remaining": "0", "Anthropic-Ratelimit-Input-Tokens-Remaining": "12000"},
			rate, true, []string{anthropic.OutputTokens}, 20 * time.Second},
		{"rate limit, reset", 429, map[string]string{"Anthropic-Ratelimit-Input-Tokens-Remaining": "0", "Anthropic-Ratelimit-Input-Tokens-Reset": in5s,
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "soon"},
			rate, true, []string{anthropic.Requests, anthropic.InputTokens}, 5 * time.Second},
		{"rate limit, nothing told", 429, nil, rate, true, nil, anthropic.DefaultRatePause},
		{"a gateway's 429", 429, map[string]string{"Retry-After": "3"}, "slow down", true, nil, 3 * time.Second},
		{"overloaded", 529, map[string]string{"Retry-After": "3"}, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, nil, 0},
		{"too large", 413, nil, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`, false, nil, 0},
		{"a 429 of another type", 429, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, nil, 0},
		{"success", 200, map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0"}, `{}`, false, nil, 0},
	} {
		resp := &http.Response{StatusCode: c.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(c.body))}
		for k, v := range c.header {
			resp.Header.Set(k, v)
		}
		v := anthropic.Upstream()(resp, costs.Endpoint{Name: "messages"})
		if v.Spent != c.spent || !slices.Equal(v.Buckets, c.buckets) || v.Pause > c.pause || v.Pause < c.pause-time.Second {
			t.Errorf("%s: %+v, want spent %v, buckets %v, a pause of %v", c.name, v, c.spent, c.buckets, c.pause)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != c.body {
			t.Errorf("%s: the body left is %q", c.name, b)
		}
	}
}
