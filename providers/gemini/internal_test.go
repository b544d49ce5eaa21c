package gemini

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"
)

func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestTokenEstimate(t *testing.T) {
	part := func(p string) string { return `{"contents":[{"parts":[` + p + `]}]}` }
	inline := func(mime, data string) string {
		return part(`{"inlineData":{"mimeType":"` + mime + `","data":"` + data + `"}}`)
	}
	// What the keys count, in ASCII characters; an inline part's key is
	// counted with its data.
	keys := int64(len("contents") + len("parts"))
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"ASCII text: 4 characters a token", part(`{"text":"` + strings.Repeat("a", 400) + `"}`), (400 + keys + len64("text") + 3) / 4},
		{"wide characters: one each", part(`{"text":"東京駅"}`), (keys+len64("text")+3)/4 + 3},
		{"small image: one tile", inline("image/png", pngOf(t, 384, 200)), (keys+3)/4 + 258},
		{"large image: 768 tiles", inline("image/png", pngOf(t, 1000, 800)), (keys+3)/4 + 4*258},
		{"unreadable image: by bytes", inline("image/webp", base64.StdEncoding.EncodeToString(make([]byte, 100<<10))), (keys+3)/4 + 2*258},
		{"audio: 32 a second at 2 kB/s", inline("audio/mp3", base64.StdEncoding.EncodeToString(make([]byte, 10000))), (keys+3)/4 + 5*32},
		{"video: 263 a second at 12.5 kB/s", inline("video/mp4", base64.StdEncoding.EncodeToString(make([]byte, 25000))), (keys+3)/4 + 2*263},
	}
	for _, c := range cases {
		f, err := parse(generate, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := (Counting{}).tokens(f); got != c.want {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.want)
		}
	}
}

func len64(s string) int64 { return int64(len(s)) }

func TestMethodOf(t *testing.T) {
	for _, c := range []struct {
		verb, path string
		m          method
		model      string
	}{
		{"POST", "/v1beta/models/gemini-2.5-flash:generateContent", generate, "gemini-2.5-flash"},
		{"POST", "/v1/models/gemini-2.5-flash:streamGenerateContent", stream, "gemini-2.5-flash"},
		{"POST", "/gw/v1beta/models/gemini-embedding-001:batchEmbedContents", batchEmbed, "gemini-embedding-001"},
		{"POST", "/v1beta/models/gemini-embedding-001:embedContent", embed, "gemini-embedding-001"},
		{"POST", "/v1beta/models/gemini-2.5-flash:countTokens", countTokensFor, "gemini-2.5-flash"},
		{"GET", "/v1beta/models/gemini-2.5-flash", other, ""},
		{"POST", "/v1beta/models/gemini-2.5-flash:unknown", other, ""},
		{"POST", "/upload/v1beta/files", other, ""},
	} {
		m, model := methodOf(c.verb, c.path)
		if m != c.m || model != c.model {
			t.Errorf("%s %s = %v %q, want %v %q", c.verb, c.path, m, model, c.m, c.model)
		}
	}
}

// quotaBody is a 429 as the API sends it (troubleshooting guide).
func quotaBody(quotaID, delay string) []byte {
	return []byte(`{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"` + quotaID + `","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}`)
}

func TestReadRefusal(t *testing.T) {
	now := time.Date(2026, 3, 7, 22, 30, 0, 0, pacific) // the night before DST begins
	cases := []struct {
		name    string
		body    []byte
		minute  time.Duration
		buckets []string
		pause   time.Duration
	}{
		{"requests per minute", quotaBody("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "43s"), 0, []string{RPM}, 43 * time.Second},
		{"input tokens per minute", quotaBody("GenerateContentInputTokensPerModelPerMinute-FreeTier", "7.250s"), 0, []string{TPM}, 7250 * time.Millisecond},
		{"paid tier tokens", quotaBody("GenerateContentPaidTierInputTokensPerModelPerMinute", "1s"), 0, []string{TPM}, time.Second},
		{"requests per day: to the Pacific midnight", quotaBody("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "3s"), 0, []string{RPD}, 90 * time.Minute},
		{"requests per day, simulated: the delay", quotaBody("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "3s"), time.Second, []string{RPD}, 3 * time.Second},
		{"unknown quota: the whole scope", quotaBody("SomethingElse", "2s"), 0, nil, 2 * time.Second},
		{"no details", []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`), 0, nil, DefaultRatePause},
		{"a stream's array", append(append([]byte("["), quotaBody("GenerateRequestsPerMinutePerProjectPerModel", "5s")...), ']'), 0, []string{RPM}, 5 * time.Second},
		{"a broken delay", quotaBody("GenerateRequestsPerMinutePerProjectPerModel", "-5s"), 0, []string{RPM}, DefaultRatePause},
		{"a huge delay", quotaBody("GenerateRequestsPerMinutePerProjectPerModel", "1e12s"), 0, []string{RPM}, DefaultRatePause},
		{"not JSON", []byte("<html>429</html>"), 0, nil, DefaultRatePause},
	}
	for _, c := range cases {
		v := verdictOf(readRefusal(c.body), now, c.minute)
		if !v.Spent || strings.Join(v.Buckets, ",") != strings.Join(c.buckets, ",") || v.Pause != c.pause {
			t.Errorf("%s: %+v, want buckets %v for %v", c.name, v, c.buckets, c.pause)
		}
	}
}

func TestNextResetPacific(t *testing.T) {
	// The day DST begins lasts 23 hours.
	at := time.Date(2026, 3, 8, 0, 30, 0, 0, pacific)
	if got := NextReset(at).Sub(at); got != 23*time.Hour-30*time.Minute {
		t.Errorf("NextReset is %v away, want 22h30m", got)
	}
}

func TestDayBucket(t *testing.T) {
	real := (&Options{}).buckets(Limits{RPD: 100})[RPD].Limits[0]
	if !real.Calendar || real.Location.String() != "America/Los_Angeles" {
		t.Errorf("the real day is %+v, want the Pacific calendar day", real)
	}
	sim := (&Options{Minute: time.Second}).buckets(Limits{RPD: 100})[RPD].Limits[0]
	if sim.Calendar || sim.Window != 1440*time.Second {
		t.Errorf("the simulated day is %+v, want 1440 Minutes", sim)
	}
}
