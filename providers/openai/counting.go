package openai

import "github.com/tollgate/tollgate/quota"

// maxUnits caps every count: the most units one charge may carry.
const maxUnits = quota.MaxUnits

// Counting defaults.
const (
	// DefaultCharsPerToken is the characters of a request body counted as
	// one prompt token: OpenAI's rule of thumb, "one token generally
	// corresponds to ~4 characters of text for common English text"
	// (https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them).
	DefaultCharsPerToken = 4
	// DefaultOutputTokens is the output allowance of a request that sets
	// no max_tokens, max_completion_tokens or max_output_tokens.
	DefaultOutputTokens = 4096
)

// Counting says how a request's tokens are counted before it is sent, and
// whether they are settled after. The zero value means the defaults.
//
// OpenAI counts a request's tokens against TPM when it arrives: "Your
// rate limit is calculated as the maximum of max_tokens and the estimated
// number of tokens based on the character count of your request" (rate
// limits guide, https://developers.openai.com/api/docs/guides/rate-limits,
// "Reduce the max_tokens to match the size of your completions"). That
// sentence reads two ways: the larger of the output allowance and the
// prompt's estimate, or the allowance beside an estimate of the whole
// request. tollgate charges their sum, which is never below either
// reading: OpenAI's own parallel processor counts "prompt + n *
// max_tokens" too
// (https://github.com/openai/openai-cookbook/blob/main/examples/api_request_parallel_processor.py),
// and Azure OpenAI counts "Prompt text and count", "The max_tokens
// parameter setting" and "The best_of parameter setting"
// (https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/quota,
// "Understanding rate limits"). A request is charged prompt + choices ×
// allowance tokens, where:
//
//   - prompt is the request body's characters (Unicode code points)
//     divided by CharsPerToken, rounded up: "the character count of your
//     request", the whole JSON text, keys, punctuation and escapes
//     included, so never fewer than its characters of text would give; plus one for each
//     number in "input" or "prompt" (text sent as token ids). An inline
//     file (a base64 data: URL) counts MediaTokens instead of its bytes,
//     when MediaTokens is set.
//   - allowance is Chat Completions' max_completion_tokens or max_tokens
//     (the larger, when both are sent), Responses' max_output_tokens, the
//     legacy Completions' max_tokens; OutputTokens when the request sets
//     none. Embeddings have none.
//   - choices is Chat Completions' n; the legacy Completions' n or
//     best_of, the larger (best_of completions are generated to return
//     n); 1 otherwise.
//
// A value the API would refuse (a negative or fractional max_tokens, n
// of 0, a string) counts as absent. Counts stop at quota.MaxUnits, so an
// absurd n is a charge no limit holds: refused at once, never sent.
//
// OpenAI then reports what it counted in the x-ratelimit-remaining-*
// headers, and tollgate holds its count to them (Bucket.Follows): a
// count of its own below OpenAI's is corrected within a response.
type Counting struct {
	// CharsPerToken is the characters of a request body counted as one
	// prompt token; 0 means DefaultCharsPerToken. Lower counts more: 1
	// counts a token per character, for a server that counts more
	// carefully than OpenAI.
	CharsPerToken int64
	// OutputTokens is the output allowance of a request that sets none,
	// per choice; 0 means DefaultOutputTokens.
	OutputTokens int64
	// MediaTokens, when positive, is what each inline file counts instead
	// of its bytes, e.g. 1500 for an image: a 1 MB image counts some
	// 260,000 tokens by its bytes, more than OpenAI counts for it. 0 counts
	// its bytes.
	MediaTokens int64
	// Usage says that the server counts the tokens a request used rather
	// than its estimate (as gateways with token limits, such as LiteLLM or
	// Azure API Management's azure-openai-token-limit policy, do): each
	// estimate is then settled to the response's usage.total_tokens once
	// the body is read to its end; a Responses stream's usage is read from
	// its response.completed event, a Chat Completions stream's from the
	// last chunk, which it sends only when asked with stream_options
	// {"include_usage": true} (https://platform.openai.com/docs/api-reference/chat/create).
	// A response that does not tell keeps the estimate.
	Usage bool
}

// charsPerToken is CharsPerToken, or its default.
func (c Counting) charsPerToken() int64 {
	if c.CharsPerToken > 0 {
		return c.CharsPerToken
	}
	return DefaultCharsPerToken
}

// outputTokens is OutputTokens, or its default.
func (c Counting) outputTokens() int64 {
	if c.OutputTokens > 0 {
		return min(c.OutputTokens, maxUnits)
	}
	return DefaultOutputTokens
}

// tokens is what a request of kind k with these facts is charged, at
// least 1, at most maxUnits; 0 for a kind that counts no tokens.
func (c Counting) tokens(k kind, f facts) int64 {
	if k == other {
		return 0
	}
	size := f.size
	var media int64
	if c.MediaTokens > 0 {
		size -= f.fileChars
		media = mul(f.files, c.MediaTokens)
	}
	size = max(size, 0)
	bpt := c.charsPerToken()
	prompt := size / bpt
	if size%bpt != 0 {
		prompt++
	}
	prompt = add(add(min(prompt, maxUnits), min(f.ids, maxUnits)), media)
	allowance, choices := int64(-1), int64(1)
	switch k {
	case embeddings:
		return max(prompt, 1)
	case chat:
		allowance = max(f.maxCompletionTokens, f.maxTokens)
		choices = max(f.n, 1)
	case completions:
		allowance = f.maxTokens
		choices = max(f.n, f.bestOf, 1)
	case responses:
		allowance = f.maxOutputTokens
	}
	if allowance < 0 {
		allowance = c.outputTokens()
	}
	return max(add(prompt, mul(choices, allowance)), 1)
}

// add and mul saturate at maxUnits; their arguments are at least zero.
func add(a, b int64) int64 { return min(a+b, maxUnits) } // a, b ≤ 2^50: no overflow

func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > maxUnits/b {
		return maxUnits
	}
	return min(a*b, maxUnits)
}
