package announce

import (
	"net/http"
	"time"
)

// openAIQuotas are the quotas OpenAI announces, each in three headers whose
// names end in the same suffix, e.g. x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests and x-ratelimit-reset-requests
// (https://developers.openai.com/api/docs/guides/rate-limits). The keys are
// in Go's canonical form.
//
// "requests", "tokens" and "project-tokens" are in OpenAI's table (the last
// since 2026-06: "Project-token headers may be present when a
// project-scoped token limit applies"). "tokens_usage_based" is not
// documented but has been seen in live responses beside "tokens"
// (https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905);
// it is read as its own quota. Other suffixes are not read: their unit
// would be a guess.
var openAIQuotas = [...]struct {
	name, unit, limit, remaining, reset string
}{
	{"requests", "requests", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"tokens", "tokens", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	{"project-tokens", "tokens", "X-Ratelimit-Limit-Project-Tokens", "X-Ratelimit-Remaining-Project-Tokens", "X-Ratelimit-Reset-Project-Tokens"},
	{"tokens_usage_based", "tokens", "X-Ratelimit-Limit-Tokens_usage_based", "X-Ratelimit-Remaining-Tokens_usage_based", "X-Ratelimit-Reset-Tokens_usage_based"},
}

// readOpenAI reads OpenAI's quotas. Limits and remainders are counts, and
// resets are Go-style durations, "The time until the rate limit ...
// resets to its initial state", e.g. "6m0s". Azure OpenAI has been seen
// sending -1 for unknown counts and 0 for the reset
// (https://github.com/openai/openai-dotnet/issues/838): a negative count is
// not announced.
func readOpenAI(h http.Header, now time.Time, c *collector) {
	for _, k := range openAIQuotas {
		q := Quota{
			Dialect:   "openai",
			Name:      k.name,
			Limit:     count(h, k.limit),
			Remaining: count(h, k.remaining),
			Used:      -1,
			Unit:      k.unit,
		}
		if q.Limit < 0 && q.Remaining < 0 {
			continue
		}
		if d, ok := duration(h, k.reset); ok {
			q.Reset = now.Add(d)
		}
		if !c.add(q) {
			return
		}
	}
}
