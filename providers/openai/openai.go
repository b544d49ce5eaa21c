// Package openai meters calls to the OpenAI API, and to servers that speak
// its protocol (Azure OpenAI, vLLM, gateways), with tollgate.
//
// Begin with [NewTransport](rdb, nil): an http.RoundTripper for openai-go's
// option.WithHTTPClient or any other client; a nil rdb runs an in-process
// Redis, for a single process, and nil options limits learned from the
// responses' headers. The package's Example runs it against a local
// server. The other providers are providers/youtube, providers/github,
// providers/gemini and providers/anthropic; for any other upstream,
// tollgate.New takes a cost table and limits of your own.
//
// OpenAI limits requests and tokens per minute (RPM, TPM), and for some
// accounts per day (RPD, TPD), per model, for the organization or project
// the API key belongs to, and counts a request's tokens when it arrives:
// from its size and its output allowance (max_tokens), not from what it
// finally uses. Rate limits guide:
// https://developers.openai.com/api/docs/guides/rate-limits (formerly
// https://platform.openai.com/docs/guides/rate-limits).
//
// [NewTransport] gives a ready http.RoundTripper: every request spends one
// request and its estimated tokens from its model's buckets ([Requests],
// [Tokens]) in the pool of its credential, organization and project; the
// limits are learned from the x-ratelimit-* headers of the responses (or
// given in [Options]); a 429 rate_limit_exceeded pauses the model's
// bucket for every worker, and a 429 insufficient_quota is returned as a
// [*BillingError], which no retry can mend. How a request's tokens are
// counted is described on [Counting].
package openai

import "time"

// Bucket names: every model has both, in its own scope.
const (
	// Requests counts requests: one per call.
	Requests = "requests"
	// Tokens counts tokens, as estimated when the request is sent (see
	// Counting).
	Tokens = "tokens"
)

// Defaults.
const (
	// DefaultReservePercent is kept below every limit.
	DefaultReservePercent = 5
	// DefaultMaxBody bounds the request bodies read to count their tokens:
	// a larger body fails with ErrBody before anything is sent.
	DefaultMaxBody = 32 << 20
	// DefaultRatePause is how long a model pauses after a 429 rate limit
	// error that tells neither Retry-After nor a reset.
	DefaultRatePause = time.Second
)

// Limits are one model's rate limits, as the organization's limits page
// shows them (https://platform.openai.com/settings/organization/limits).
// Limits per minute that are 0 are learned from the x-ratelimit-limit-*
// headers of the model's responses; limits given here are where a model
// starts, and the headers still replace them. Limits per day that are 0
// are not enforced: OpenAI's headers do not announce them.
type Limits struct {
	// RPM and TPM are requests and tokens per minute, e.g. 500 and 30000.
	RPM, TPM int64
	// RPD and TPD are requests and tokens per day, e.g. 10000, counted
	// over any 24 hours.
	RPD, TPD int64
}
