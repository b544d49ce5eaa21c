package oaisim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newSim returns a Server on a clock stopped at a fixed instant.
func newSim(cfg Config) (*Server, *clock) {
	c := &clock{t: time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)}
	cfg.Now = c.now
	return New(cfg), c
}

// post sends a request to s and returns its recorded answer.
func post(s *Server, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// errorCode reads an error body's type and code.
func errorCode(t *testing.T, rec *httptest.ResponseRecorder) (typ, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Type string
			Code *string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, code
}

// A chat body of 8 characters of text (2 tokens; every string of the
// messages counts, roles too) and 40 allowed: 42.
const chat42 = `{"model":"m","messages":[{"content":"abcdefgh"}],"max_tokens":40}`

func TestMetersTokensPerMinute(t *testing.T) {
	s, c := newSim(Config{Limits: Limits{RPM: 10, TPM: 100}})
	for i, remaining := range []string{"58", "16"} {
		rec := post(s, "/v1/chat/completions", "k", chat42)
		h := rec.Header()
		if rec.Code != 200 || h.Get("X-Ratelimit-Limit-Tokens") != "100" || h.Get("X-Ratelimit-Remaining-Tokens") != remaining ||
			h.Get("X-Ratelimit-Limit-Requests") != "10" || h.Get("X-Ratelimit-Reset-Tokens") != "1m0s" {
			t.Fatalf("request %d: %d %v; want 200 with %s tokens remaining, reset 1m0s", i, rec.Code, h, remaining)
		}
		c.add(time.Second)
	}
	rec := post(s, "/v1/chat/completions", "k", chat42)
	if typ, code := errorCode(t, rec); rec.Code != 429 || typ != "tokens" || code != "rate_limit_exceeded" || rec.Header().Get("Retry-After") != "58" {
		t.Fatalf("over the TPM: %d %s %s, Retry-After %q; want 429 tokens rate_limit_exceeded, 58", rec.Code, typ, code, rec.Header().Get("Retry-After"))
	}
	c.add(58 * time.Second) // the first request leaves the window
	if rec := post(s, "/v1/chat/completions", "k", chat42); rec.Code != 200 {
		t.Fatalf("a minute after the first: %d", rec.Code)
	}
	if rec := post(s, "/v1/chat/completions", "other-key", chat42); rec.Code != 200 {
		t.Errorf("another key: %d; want its own minute", rec.Code)
	}
	var tokens []int64
	for _, a := range s.Arrivals() {
		tokens = append(tokens, a.Tokens)
	}
	if got, want := tokens, []int64{42, 42, 0, 42, 42}; !equal(got, want) {
		t.Errorf("arrivals count %v tokens, want %v", got, want)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRefusals(t *testing.T) {
	s, _ := newSim(Config{Limits: Limits{RPM: 2, TPM: 100}, Broke: []string{"sk-broke"}})
	if rec := post(s, "/v1/chat/completions", "k", `{"model":"m","messages":[],"max_tokens":500}`); rec.Code != 429 ||
		!strings.Contains(rec.Body.String(), "Request too large") {
		t.Errorf("a request over the TPM alone: %d %s", rec.Code, rec.Body)
	}
	post(s, "/v1/chat/completions", "k", chat42)
	rec := post(s, "/v1/chat/completions", "k", chat42)
	if typ, _ := errorCode(t, rec); rec.Code != 429 || typ != "requests" {
		t.Errorf("past the RPM, counting the refused request: %d %s", rec.Code, typ)
	}
	rec = post(s, "/v1/chat/completions", "sk-broke", chat42)
	if typ, code := errorCode(t, rec); rec.Code != 429 || typ != "insufficient_quota" || code != "insufficient_quota" {
		t.Errorf("no credits: %d %s %s", rec.Code, typ, code)
	}
	for _, bad := range []string{`not json`, `{"messages":[]}`, `{"model":"m","messages":[],"n":0}`, `{"model":"m","messages":[],"max_tokens":2.5}`} {
		if rec := post(s, "/v1/chat/completions", "k2", bad); rec.Code != 400 {
			t.Errorf("%s: %d, want 400", bad, rec.Code)
		}
	}
	if rec := post(s, "/v1/images/generations", "k", `{}`); rec.Code != 404 {
		t.Errorf("an API it does not serve: %d", rec.Code)
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		want       int64
	}{
		{"/v1/chat/completions", chat42, 42},
		{"/v1/chat/completions", `{"model":"m","messages":[{"content":"駅 東京 🚀"}],"max_completion_tokens":10,"max_tokens":7,"n":2}`, 2 + 20},
		{"/v1/chat/completions", `{"model":"m","messages":[]}`, DefaultMaxTokens},
		{"/v1/responses", `{"model":"m","input":"abcd","instructions":"abcd","max_output_tokens":9}`, 2 + 9},
		{"/v1/embeddings", `{"model":"m","input":["abcd","abcdefgh"]}`, 3},
		{"/v1/embeddings", `{"model":"m","input":[1,2,3]}`, 3},
		{"/v1/completions", `{"model":"m","prompt":"abcd","max_tokens":5,"n":2,"best_of":3}`, 1 + 15},
		{"/openai/deployments/d/chat/completions", chat42, 42},
	} {
		got, err := Count(tc.path, []byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("%s %s: %d %v, want %d", tc.path, tc.body, got, err, tc.want)
		}
	}
}

func TestStreamsAndUsage(t *testing.T) {
	s, _ := newSim(Config{CountUsage: true, Silent: true})
	rec := post(s, "/v1/chat/completions", "k", `{"model":"m","messages":[{"content":"hi"}],"max_tokens":40,"stream":true,"stream_options":{"include_usage":true}}`)
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `"total_tokens"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") || rec.Header().Get("X-Ratelimit-Limit-Tokens") != "" {
		t.Errorf("chat stream: %d %v %q", rec.Code, rec.Header(), body)
	}
	rec = post(s, "/v1/responses", "k", `{"model":"m","input":"hi","stream":true}`)
	if !strings.Contains(rec.Body.String(), "event: response.completed") {
		t.Errorf("responses stream: %q", rec.Body)
	}
	rec = post(s, "/v1/chat/completions", "k", `{"model":"m","messages":[{"content":"hi"}],"max_tokens":40}`)
	var answer struct {
		Usage struct {
			TotalTokens int64 `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	as := s.Arrivals()
	if last := as[len(as)-1]; last.Tokens != answer.Usage.TotalTokens || last.Tokens >= 1+40 {
		t.Errorf("counting usage: the arrival counts %d tokens, the answer tells %d; want them equal, under the 41 allowed", last.Tokens, answer.Usage.TotalTokens)
	}
}

func TestAzureDeployment(t *testing.T) {
	s, _ := newSim(Config{Models: map[string]Limits{"prod": {RPM: 1, TPM: 1000}}})
	req := httptest.NewRequest("POST", "/openai/deployments/prod/chat/completions?api-version=2024-10-21", strings.NewReader(chat42))
	req.Header.Set("Api-Key", "azure")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit-Requests") != "1" || s.Arrivals()[0].Model != "prod" {
		t.Errorf("%d %v %+v: want the deployment's limits", rec.Code, rec.Header(), s.Arrivals())
	}
}
