package gemsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func post(s *Server, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("X-Goog-Api-Key", "k")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

const gen = "/v1beta/models/m:generateContent"

func text(s string) string { return `{"contents":[{"parts":[{"text":"` + s + `"}]}]}` }

// refusal reads a 429's quotaId and retryDelay.
func refusal(t *testing.T, rec *httptest.ResponseRecorder) (quotaID, delay string) {
	t.Helper()
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", rec.Code, rec.Body)
	}
	var st struct {
		Error struct {
			Status  string
			Details []struct {
				Type       string `json:"@type"`
				Violations []struct{ QuotaID string }
				RetryDelay string
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	for _, d := range st.Error.Details {
		switch d.Type {
		case "type.googleapis.com/google.rpc.QuotaFailure":
			quotaID = d.Violations[0].QuotaID
		case "type.googleapis.com/google.rpc.RetryInfo":
			delay = d.RetryDelay
		}
	}
	return quotaID, delay
}

func TestLimits(t *testing.T) {
	c := &clock{now: time.Unix(1e9, 0)}
	s := New(Config{Models: map[string]Limits{"m": {RPM: 2, TPM: 10, RPD: 3}}, Minute: time.Second, Now: c.Now})
	if rec := post(s, gen, text("12345678")); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"promptTokenCount":2`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	c.now = c.now.Add(100 * time.Millisecond)
	if id, delay := refusal(t, post(s, gen, text(strings.Repeat("a", 36)))); id != QuotaTPM || delay != "0.900s" {
		t.Errorf("over the TPM: %s %s", id, delay)
	}
	post(s, gen, text("a"))
	if id, _ := refusal(t, post(s, gen, text("a"))); id != QuotaRPM {
		t.Errorf("over the RPM: %s", id)
	}
	c.now = c.now.Add(time.Second)
	post(s, gen, text("a"))
	if id, _ := refusal(t, post(s, gen, text("a"))); id != QuotaRPD {
		t.Errorf("over the RPD: %s", id)
	}
	// countTokens is free, even now.
	if rec := post(s, "/v1beta/models/m:countTokens", text("12345678")); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"totalTokens":2`) {
		t.Errorf("countTokens: %d %s", rec.Code, rec.Body)
	}
	// The day is 1,440 minutes.
	c.now = c.now.Add(1440 * time.Second)
	if rec := post(s, gen, text("a")); rec.Code != 200 {
		t.Errorf("a day later: %d", rec.Code)
	}
	var ok, refused int
	for _, a := range s.Arrivals() {
		if a.Status == 200 {
			ok++
		} else {
			refused++
		}
	}
	if ok != 4 || refused != 3 {
		t.Errorf("arrivals: %d admitted, %d refused", ok, refused)
	}
}

func TestBatchAndStream(t *testing.T) {
	s := New(Config{Models: map[string]Limits{"e": {RPM: 3}, "m": {}}})
	batch := `{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]}}]}`
	if rec := post(s, "/v1beta/models/e:batchEmbedContents", batch); rec.Code != 200 || strings.Count(rec.Body.String(), "values") != 2 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if id, _ := refusal(t, post(s, "/v1beta/models/e:batchEmbedContents", batch)); id != QuotaRPM {
		t.Errorf("a second batch of two: %s, want the RPM of 3", id)
	}
	rec := post(s, "/v1beta/models/m:streamGenerateContent?alt=sse", text("hi"))
	if rec.Code != 200 || strings.Count(rec.Body.String(), "data: ") != 3 || !strings.Contains(rec.Body.String(), "promptTokenCount") {
		t.Errorf("stream: %d %s", rec.Code, rec.Body)
	}
	if rec := post(s, "/v1beta/models/unknown:generateContent", text("hi")); rec.Code != 404 {
		t.Errorf("an unknown model: %d", rec.Code)
	}
}
