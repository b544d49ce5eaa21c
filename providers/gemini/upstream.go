package gemini

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// Gemini refuses a request over a limit with 429 RESOURCE_EXHAUSTED
// (troubleshooting guide,
// https://ai.google.dev/gemini-api/docs/troubleshooting: "429
// RESOURCE_EXHAUSTED: You've exceeded the rate limit"). Its body is a
// google.rpc.Status whose details name the limit: a google.rpc.QuotaFailure
// whose violations' quotaId says which limit, per minute or per day,
// requests or input tokens (e.g.
// "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
// "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
// "GenerateContentInputTokensPerModelPerMinute-FreeTier"), and a
// google.rpc.RetryInfo whose retryDelay (a protobuf Duration: "43s",
// "0.5s") says when to try again
// (https://cloud.google.com/apis/design/errors#error_details). Nothing is
// in the headers.

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 16 << 10

// maxPause bounds the delays read from a body: longer is a broken or
// hostile body.
const maxPause = 48 * time.Hour

// minPause is the shortest pause: a retryDelay of "0s" still means not now.
const minPause = 10 * time.Millisecond

// refusal is what a 429 body tells: the buckets its violations name (none
// when it names none that tollgate knows), and its retryDelay.
type refusal struct {
	exhausted bool     // status RESOURCE_EXHAUSTED (or code 429)
	buckets   []string // RPM, RPD, TPM, each once
	delay     time.Duration
	hasDelay  bool
}

// rpcStatus is a google.rpc.Status as JSON: {"error": {"code", "message",
// "status", "details": [...]}}. A stream's error may come as an array of
// them.
type rpcStatus struct {
	Error *struct {
		Code    any               `json:"code"`
		Status  any               `json:"status"`
		Details []json.RawMessage `json:"details"`
	} `json:"error"`
}

// detail is one of a Status's details: its @type and what the types read
// here hold.
type detail struct {
	Type       any `json:"@type"`
	Violations []struct {
		QuotaID     any `json:"quotaId"`
		QuotaMetric any `json:"quotaMetric"`
	} `json:"violations"`
	RetryDelay any `json:"retryDelay"`
}

// readRefusal reads a 429 body. It never fails: what it cannot read it
// leaves out.
func readRefusal(body []byte) refusal {
	var st rpcStatus
	if json.Unmarshal(body, &st) != nil || st.Error == nil {
		var list []rpcStatus
		if json.Unmarshal(body, &list) != nil || len(list) == 0 || list[0].Error == nil {
			return refusal{}
		}
		st = list[0]
	}
	var r refusal
	if s, _ := st.Error.Status.(string); s == "RESOURCE_EXHAUSTED" {
		r.exhausted = true
	}
	if c, _ := st.Error.Code.(float64); c == 429 {
		r.exhausted = true
	}
	for _, raw := range st.Error.Details {
		var d detail
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		typ, _ := d.Type.(string)
		switch {
		case strings.HasSuffix(typ, "google.rpc.QuotaFailure"):
			for _, v := range d.Violations {
				id, _ := v.QuotaID.(string)
				if id == "" {
					id, _ = v.QuotaMetric.(string)
				}
				if b := bucketOf(id); b != "" && !contains(r.buckets, b) {
					r.buckets = append(r.buckets, b)
				}
			}
		case strings.HasSuffix(typ, "google.rpc.RetryInfo"):
			s, _ := d.RetryDelay.(string)
			if dl, ok := parseDelay(s); ok {
				r.delay, r.hasDelay = max(r.delay, dl), true
			}
		}
	}
	return r
}

// bucketOf names the bucket a quotaId (or quotaMetric) is about, or "".
func bucketOf(id string) string {
	l := strings.ToLower(id)
	switch {
	case strings.Contains(l, "perday"), strings.Contains(l, "per_day"):
		return RPD
	case !strings.Contains(l, "perminute") && !strings.Contains(l, "per_minute"):
		return ""
	case strings.Contains(l, "token"):
		return TPM
	case strings.Contains(l, "request"):
		return RPM
	}
	return ""
}

// parseDelay reads a protobuf Duration in JSON: seconds with up to nine
// decimals and an "s", e.g. "43s", "0.250s".
func parseDelay(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok || num == "" || num[0] == '+' || num[0] == '-' {
		return 0, false
	}
	secs, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(secs) || secs < 0 || secs > maxPause.Seconds() {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Upstream returns the tollgate.UpstreamFunc of NewTransport's Transport
// on the real clock: see upstream.
func Upstream() tollgate.UpstreamFunc { return upstream(0) }

// upstream reads a 429 for the limit it names. A day's limit (RPD) pauses
// until the next Pacific midnight (with a simulated minute, for the
// retryDelay, or a day of them when none is told); a minute's limit (RPM,
// TPM) for the retryDelay, or DefaultRatePause when none is told. A 429
// that names no limit tollgate knows pauses the request's whole scope
// (its project and model) as long. Every other response pauses nothing.
// Only 429 bodies are read, and they are left whole for the caller.
func upstream(minute time.Duration) tollgate.UpstreamFunc {
	return func(resp *http.Response, _ costs.Endpoint) tollgate.Verdict {
		if resp.StatusCode != http.StatusTooManyRequests {
			return tollgate.Verdict{}
		}
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		return verdictOf(readRefusal(body), time.Now(), minute)
	}
}

// verdictOf turns a refusal into the pause it asks for.
func verdictOf(r refusal, now time.Time, minute time.Duration) tollgate.Verdict {
	d := DefaultRatePause
	if r.hasDelay {
		d = r.delay
	}
	if contains(r.buckets, RPD) {
		switch {
		case minute == 0:
			d = max(d, NextReset(now).Sub(now))
		case !r.hasDelay:
			d = 1440 * minute
		}
	}
	return tollgate.Verdict{Spent: true, Buckets: r.buckets, Pause: max(d, minPause), Reason: "RESOURCE_EXHAUSTED"}
}

// NextReset returns the first Pacific midnight after t: when a spent day's
// quota comes back (https://ai.google.dev/gemini-api/docs/rate-limits).
// A day there lasts 23 or 25 hours when daylight saving time begins or
// ends.
func NextReset(t time.Time) time.Time {
	y, m, d := t.In(pacific).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, pacific)
}

// pacific is where Gemini's day ends.
var pacific = mustLoad("America/Los_Angeles")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("gemini: " + err.Error())
	}
	return loc
}
