package announce

import (
	"net/http"
	"time"
)

// anthropicQuotas are the quotas Anthropic announces, each in three
// headers: anthropic-ratelimit-<name>-limit, -remaining and -reset (rate
// limits page, "Response headers",
// https://docs.anthropic.com/en/api/rate-limits). "tokens" tells "the
// most restrictive limit currently in effect" of the input and output
// tokens. The keys are in Go's canonical form.
var anthropicQuotas = [...]struct {
	name, unit, limit, remaining, reset string
}{
	{"requests", "requests", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"input-tokens", "tokens", "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"output-tokens", "tokens", "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
	{"tokens", "tokens", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
}

// readAnthropic reads Anthropic's quotas. Limits and remainders are counts
// (token remainders "rounded to the nearest thousand"); a reset is "the
// time when the rate limit will be fully replenished, provided in RFC
// 3339 format": an instant, read as now when it is already past.
func readAnthropic(h http.Header, now time.Time, c *collector) {
	for _, k := range anthropicQuotas {
		q := Quota{
			Dialect:   "anthropic",
			Name:      k.name,
			Limit:     count(h, k.limit),
			Remaining: count(h, k.remaining),
			Used:      -1,
			Unit:      k.unit,
		}
		if q.Limit < 0 && q.Remaining < 0 {
			continue
		}
		if at, ok := instant(h, k.reset); ok && !at.After(now.Add(maxAhead)) {
			q.Reset = at
			if at.Before(now) {
				q.Reset = now
			}
		}
		if !c.add(q) {
			return
		}
	}
}

// instant reads a field holding an RFC 3339 date-time, such as
// "2026-06-01T12:00:30Z" or with a fraction of a second and an offset;
// at most 40 bytes.
func instant(h http.Header, key string) (time.Time, bool) {
	v, ok := plainField(h, key)
	if !ok || len(v) > 40 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
