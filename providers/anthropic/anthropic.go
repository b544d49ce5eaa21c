// Package anthropic meters calls to Anthropic's Messages API with
// tollgate, counting as Anthropic counts.
//
// Begin with [NewTransport](rdb, nil): an http.RoundTripper for
// anthropic-sdk-go's option.WithHTTPClient or any other client; a nil rdb
// runs an in-process Redis, for a single process, and nil options learn
// the limits from the responses' headers. The package's Example runs it
// against a local server. The other providers are providers/youtube,
// providers/github, providers/openai and providers/gemini.
//
// Anthropic limits requests, input tokens and output tokens per minute
// (RPM, ITPM, OTPM) per organization and model class, each with the token
// bucket algorithm: "your capacity is continuously replenished up to your
// maximum limit, rather than being reset at fixed intervals" (rate limits
// page, https://docs.anthropic.com/en/api/rate-limits). [NewTransport]
// gives a ready http.RoundTripper: every Messages request spends one
// request, its estimated input tokens and its max_tokens from its model
// class's buckets ([Requests], [InputTokens], [OutputTokens]) in the pool
// of its API key; the output and input tokens are settled to the answer's
// usage, from the JSON body or the stream (the input tokens as ITPM counts
// them: input_tokens, cache_creation_input_tokens and, for the classes
// [DefaultCacheReads] names, cache_read_input_tokens); the limits are learned from the
// anthropic-ratelimit-* headers (or given in [Options]); a 429
// rate_limit_error pauses the class's spent bucket for every worker for its
// retry-after. How a request's tokens are counted is described on
// [Counting].
package anthropic

import "time"

// Bucket names: every model class has the three, in its own scope.
const (
	// Requests counts requests: one per call (RPM).
	Requests = "requests"
	// InputTokens counts input tokens (ITPM), as estimated when the
	// request is sent, settled to its usage when told (see Counting).
	InputTokens = "input-tokens"
	// OutputTokens counts output tokens (OTPM): max_tokens when the
	// request is sent, settled to usage.output_tokens when it ends, what
	// was not used given back as Anthropic gives it back (see Counting).
	OutputTokens = "output-tokens"
)

// Defaults.
const (
	// DefaultReservePercent is kept below every limit.
	DefaultReservePercent = 5
	// DefaultMaxBody bounds the request bodies read to count their tokens,
	// the Messages API's own bound ("Messages API: 32 MB", errors page,
	// https://docs.anthropic.com/en/api/errors): a larger body fails with
	// ErrBody before anything is sent.
	DefaultMaxBody = 32 << 20
	// DefaultRatePause is how long a class pauses after a 429 that tells
	// neither retry-after nor a reset.
	DefaultRatePause = time.Second
)

// Limits are one model class's rate limits per minute, as the Console's
// limits page shows them, e.g. RPM 50, ITPM 30000, OTPM 8000. Limits that
// are 0 are learned from the anthropic-ratelimit-*-limit headers of the
// class's responses; limits given here are where a class starts, and the
// headers still replace them.
type Limits struct {
	RPM, ITPM, OTPM int64
}
