package gemini

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzTokenEstimate: any body is read without panic; a JSON body's
// estimate is at least one token and at most quota.MaxUnits, and never
// less than its text parts count by Google's rule of thumb (a token per
// four characters of each part, rounded up; at least one per character
// that is not ASCII).
func FuzzTokenEstimate(f *testing.F) {
	f.Add([]byte(`{"contents":[{"parts":[{"text":"hello"}]}]}`))
	f.Add([]byte(`{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]}]}`))
	f.Add([]byte(`{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]}}]}`))
	f.Add([]byte(`{"contents":[{"parts":[{"inline_data":{"mime_type":"video/mp4","data":"AAAA"}},{"file_data":{"file_uri":"x"}}]}]}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"a"},{"text":"b"},{"text":"東京"}]}]}`))
	f.Add([]byte(`[[[[[[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, m := range []method{generate, batchEmbed} {
			fs, err := parse(m, body)
			if err != nil {
				continue
			}
			n := (Counting{}).tokens(fs)
			if n < 1 || n > maxUnits || fs.requests < 1 {
				t.Fatalf("%q: %d tokens, %d requests", body, n, fs.requests)
			}
			var top map[string]any
			json.Unmarshal(body, &top)
			if want := textTokens(top, 0); n < want {
				t.Fatalf("%q: %d tokens, under the text parts' %d", body, n, want)
			}
		}
	})
}

// textTokens counts the text parts of v (strings under "text" keys) by
// the rule of thumb, each part on its own.
func textTokens(v any, depth int) int64 {
	var n int64
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			n += textTokens(e, depth+1)
		}
	case map[string]any:
		for k, e := range v {
			if k == "inlineData" || k == "inline_data" {
				continue
			}
			if s, ok := e.(string); ok && k == "text" {
				var ascii, wide int64
				for _, r := range s {
					if r < utf8.RuneSelf {
						ascii++
					} else {
						wide++
					}
				}
				n += (ascii+3)/4 + wide
			}
			if depth < maxDepth {
				n += textTokens(e, depth+1)
			}
		}
	}
	return n
}

// FuzzQuotaFailure: any 429 body gives a verdict without panic: spent,
// each bucket named once and known, and a pause within bounds.
func FuzzQuotaFailure(f *testing.F) {
	f.Add([]byte(quotaBody("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "43s")), int64(0))
	f.Add([]byte(quotaBody("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "0.5s")), int64(time.Second))
	f.Add([]byte(`[{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"1.000000001s"}]}}]`), int64(0))
	f.Add([]byte(`{"error":{"details":[{"@type":7,"violations":"x"}]}}`), int64(0))
	f.Fuzz(func(t *testing.T, body []byte, minute int64) {
		minute = max(minute, 0) % int64(time.Minute)
		now := time.Now()
		v := verdictOf(readRefusal(body), now, time.Duration(minute))
		if !v.Spent || v.Pause < minPause || v.Pause > max(maxPause, 1440*time.Duration(minute)) {
			t.Fatalf("%q: %+v", body, v)
		}
		seen := map[string]bool{}
		for _, b := range v.Buckets {
			if seen[b] || (b != RPM && b != RPD && b != TPM) {
				t.Fatalf("%q: buckets %v", body, v.Buckets)
			}
			seen[b] = true
		}
	})
}
