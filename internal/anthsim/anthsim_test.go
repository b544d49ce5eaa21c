package anthsim

import (
	"encoding/json"
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

// post sends a Messages request to s with key and returns its answer.
func post(s *Server, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// errorType reads an error body's type.
func errorType(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Type  string
		Error struct{ Type string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Type != "error" {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return e.Error.Type
}

// msg is a request of about n bytes of text asking for maxTokens.
func msg(model string, n, maxTokens int) string {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a", n)}}})
	return string(b)
}

func TestBucketsRefillContinuously(t *testing.T) {
	s, c := newSim(Config{Limits: Limits{RPM: 4, ITPM: 100000, OTPM: 100000}})
	for i := range 4 {
		if rec := post(s, "k", msg("claude-sonnet-4-5", 10, 10)); rec.Code != 200 {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := post(s, "k", msg("claude-sonnet-4-5", 10, 10))
	if rec.Code != 429 || errorType(t, rec) != "rate_limit_error" || rec.Header().Get("Retry-After") != "15" {
		t.Fatalf("fifth request: %d %q retry-after %q, want 429 rate_limit_error, retry-after 15 (a request per 15s)", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	// A quarter of a minute refills one request: a bucket, not a window.
	c.add(15 * time.Second)
	if rec := post(s, "k", msg("claude-sonnet-4-5", 10, 10)); rec.Code != 200 {
		t.Fatalf("after 15s: %d, want 200", rec.Code)
	}
	if rec := post(s, "k", msg("claude-sonnet-4-5", 10, 10)); rec.Code != 429 {
		t.Fatalf("the second after 15s: %d, want 429", rec.Code)
	}
	// Another class has its own buckets; another key its own organization.
	if rec := post(s, "k", msg("claude-opus-4-1", 10, 10)); rec.Code != 200 {
		t.Fatalf("another class: %d, want 200", rec.Code)
	}
	if rec := post(s, "other", msg("claude-sonnet-4-5", 10, 10)); rec.Code != 200 {
		t.Fatalf("another key: %d, want 200", rec.Code)
	}
	st := s.Stats()
	if st.Refused[Requests] != 2 || st.MaxUse["claude-sonnet-4"][Requests] != 4 {
		t.Errorf("stats %+v, want 2 refusals of requests, a use of 4", st)
	}
}

func TestOutputChargedByMaxTokensThenCorrected(t *testing.T) {
	s, _ := newSim(Config{Limits: Limits{RPM: 100, ITPM: 100000, OTPM: 1000}})
	rec := post(s, "k", msg("claude-haiku-4-5", 10, 1000))
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var m struct {
		Usage struct {
			OutputTokens int64 `json:"output_tokens"`
		}
	}
	json.Unmarshal(rec.Body.Bytes(), &m)
	used := m.Usage.OutputTokens
	if used < 500 || used > 1000 {
		t.Fatalf("output tokens %d, want from half of max_tokens to all", used)
	}
	// max_tokens of what is left after the correction fits; one more does not.
	if rec := post(s, "k", msg("claude-haiku-4-5", 10, int(1000-used))); rec.Code != 200 {
		t.Fatalf("max_tokens %d after %d used: %d, want 200", 1000-used, used, rec.Code)
	}
	if rec := post(s, "k", msg("claude-haiku-4-5", 10, 1000)); rec.Code != 429 {
		t.Fatalf("max_tokens 1000 on a spent bucket: %d, want 429", rec.Code)
	}
	a := s.Arrivals()
	if a[0].Output != used || a[0].Usage.OutputTokens != used {
		t.Errorf("arrival %+v, want output %d", a[0], used)
	}
	if got := s.Stats().MaxUse["claude-haiku-4"][OutputTokens]; got != 1000 {
		t.Errorf("most output use %d, want 1000 (max_tokens charged at the start)", got)
	}
}

func TestCacheReadsCountOnlyWhereMarked(t *testing.T) {
	body := `{"model":"%s","max_tokens":5,"system":[{"type":"text","text":"` + strings.Repeat("s", 4000) +
		`","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		reads bool
		want  int64 // ITPM counted by the second request
	}{{false, 1 + messageTokens + requestTokens}, {true, 1000 + 1 + messageTokens + requestTokens}} {
		s, _ := newSim(Config{Limits: Limits{RPM: 100, ITPM: 100000, OTPM: 1000, CacheReads: c.reads}})
		for range 2 {
			if rec := post(s, "k", strings.Replace(body, "%s", "claude-sonnet-4-5", 1)); rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
		a := s.Arrivals()
		if a[0].Usage.CacheCreationInputTokens != 1000 || a[0].Input != 1000+1+messageTokens+requestTokens {
			t.Errorf("first arrival %+v, want 1000 cache creation tokens counted", a[0])
		}
		if a[1].Usage.CacheReadInputTokens != 1000 || a[1].Input != c.want {
			t.Errorf("cache reads count %v: second arrival %+v, want 1000 read, %d counted", c.reads, a[1], c.want)
		}
	}
}

func TestHeaders(t *testing.T) {
	s, c := newSim(Config{Limits: Limits{RPM: 50, ITPM: 30000, OTPM: 8000}})
	rec := post(s, "k", msg("claude-sonnet-4-5", 4000, 2600))
	h := rec.Header()
	in := 1000 + messageTokens + requestTokens
	for name, want := range map[string]string{
		"Anthropic-Ratelimit-Requests-Limit":          "50",
		"Anthropic-Ratelimit-Requests-Remaining":      "49",
		"Anthropic-Ratelimit-Input-Tokens-Limit":      "30000",
		"Anthropic-Ratelimit-Input-Tokens-Remaining":  "29000", // 28993, to the nearest thousand
		"Anthropic-Ratelimit-Output-Tokens-Limit":     "8000",
		"Anthropic-Ratelimit-Output-Tokens-Remaining": "5000", // 5400: the most restrictive
		"Anthropic-Ratelimit-Tokens-Remaining":        "5000",
		"Anthropic-Ratelimit-Tokens-Limit":            "8000",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q (input %d)", name, got, want, in)
		}
	}
	reset, err := time.Parse(time.RFC3339, h.Get("Anthropic-Ratelimit-Output-Tokens-Reset"))
	if want := c.now().Add(20 * time.Second); err != nil || !reset.Equal(want) {
		t.Errorf("output reset %q (%v), want %v: full again after 2600 of 8000 a minute", h.Get("Anthropic-Ratelimit-Output-Tokens-Reset"), err, want)
	}
}

func TestOverloadedAndTooLarge(t *testing.T) {
	s, _ := newSim(Config{OverloadEvery: 3, MaxBody: 1000})
	var codes []int
	for range 6 {
		codes = append(codes, post(s, "k", msg("claude-sonnet-4-5", 10, 10)).Code)
	}
	if want := []int{200, 200, 529, 200, 200, 529}; !equal(codes, want) {
		t.Errorf("codes %v, want %v", codes, want)
	}
	rec := post(s, "k", msg("claude-sonnet-4-5", 2000, 10))
	if rec.Code != 413 || errorType(t, rec) != "request_too_large" {
		t.Errorf("a large body: %d %s, want 413 request_too_large", rec.Code, rec.Body)
	}
	if st := s.Stats(); st.Overloaded != 2 || st.MaxUse["claude-sonnet-4"][Requests] != 4 {
		t.Errorf("stats %+v: want 2 overloaded, 4 requests metered", st)
	}
}

func equal(a, b []int) bool {
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

func TestStream(t *testing.T) {
	s, _ := newSim(Config{})
	body := strings.Replace(msg("claude-sonnet-4-5", 400, 30), `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
	rec := post(s, "k", body)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", rec.Code, rec.Header())
	}
	var names []string
	var lastOutput int64
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"message_delta"`) {
			var d struct {
				Usage struct {
					OutputTokens int64 `json:"output_tokens"`
				}
			}
			json.Unmarshal([]byte(data), &d)
			lastOutput = d.Usage.OutputTokens
		}
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "message_start content_block_start ping content_block_delta") || !strings.HasSuffix(got, "content_block_stop message_delta message_stop") {
		t.Errorf("events %s", got)
	}
	a := s.Arrivals()[0]
	if !a.Stream || lastOutput < 1 || a.Output != lastOutput {
		t.Errorf("arrival %+v, message_delta told %d output tokens", a, lastOutput)
	}
}

func TestClassOf(t *testing.T) {
	for model, want := range map[string]string{
		"claude-opus-4-1-20250805":   "claude-opus-4",
		"claude-opus-4-5":            "claude-opus-4",
		"claude-sonnet-4-5-20250929": "claude-sonnet-4",
		"claude-haiku-4-5":           "claude-haiku-4",
		"claude-3-5-haiku-20241022":  "claude-3-5-haiku",
		"claude-3-haiku-20240307":    "claude-3-haiku",
		"my-model":                   "my-model",
	} {
		if got := ClassOf(model); got != want {
			t.Errorf("ClassOf(%q) = %q, want %q", model, got, want)
		}
	}
}
