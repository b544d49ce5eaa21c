package anthropic

import "github.com/tollgate/tollgate/quota"

// maxUnits caps every count: the most units one charge may carry.
const maxUnits = quota.MaxUnits

// Counting defaults.
const (
	// DefaultBytesPerToken is the bytes of a request body counted as one
	// input token: one, so that no text counts fewer tokens than
	// Anthropic counts (see Counting).
	DefaultBytesPerToken = 1
	// DefaultToolTokens is what a request that gives tools counts for the
	// tool use system prompt the API adds, which its body does not hold:
	// above the largest the tool use page lists (346 tokens,
	// https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#pricing).
	DefaultToolTokens = 512
	// DefaultReferenceTokens is what an image or document given by URL or
	// file id counts, its bytes not being in the body: about the most an
	// image counts at the standard resolution ("tokens = (width px * height
	// px)/750", images of up to 1.15 megapixels,
	// https://docs.anthropic.com/en/docs/build-with-claude/vision). A
	// document of many pages counts more: raise it, or let the announced
	// remainders correct the count.
	DefaultReferenceTokens = 1600
)

// Counting says how a request's tokens are counted before it is sent. The
// zero value means the defaults.
//
// Anthropic counts a request's input tokens (ITPM) when it arrives, and its
// output tokens (OTPM) twice: "OTPM rate limits are estimated based on
// max_tokens at the beginning of each request and adjusted at the end of
// the request to reflect the actual number of output tokens used" (rate
// limits page, https://docs.anthropic.com/en/api/rate-limits). ITPM counts
// input_tokens and cache_creation_input_tokens; for most models
// cache_read_input_tokens do not count ("Cache-aware ITPM"). So a request
// is charged:
//
//   - 1 of Requests;
//   - of InputTokens, the request body's bytes divided by BytesPerToken,
//     rounded up; plus ToolTokens when it gives tools; an inline image or
//     document (a base64 source) counts InlineTokens instead of its bytes
//     when InlineTokens is set; one given by URL or file id counts
//     ReferenceTokens. Claude's tokenizer, like every byte-level BPE, makes
//     each token of at least one byte of UTF-8 text, so no text counts more
//     tokens than its bytes; the JSON around it (keys, quotes, escapes,
//     some 30 bytes a message) outweighs the few tokens the API adds to
//     frame each message. With the default of one byte a token the
//     estimate is never below Anthropic's count for text; it is settled to
//     usage.input_tokens (see below), so the surplus is given back when
//     the answer tells;
//   - of OutputTokens, max_tokens; none for a request without it, which
//     the API refuses.
//
// Once answered, the output tokens are settled to usage.output_tokens: of
// the JSON answer, or of the stream's message_delta event (a stream that
// ends without one keeps max_tokens); to 0 for an answer refused before
// any output (400, 401, 403, 404, 413, 429, 529). What was not used comes
// back as Anthropic's bucket takes it back, all of it at once, up to full,
// however long the answer took (quota.Limit.AsUpstream; unless
// Options.ConservativeRefunds). The input tokens are
// settled to usage.input_tokens (of the JSON answer, or the stream's
// message_start); for a request with cache_control, whose input_tokens
// leaves out the cache's tokens, NewTransport's Transport adds
// usage.cache_creation_input_tokens, and usage.cache_read_input_tokens
// when its class counts cache reads (Options.CacheReads; by default only
// the classes the rate limits page marks: see DefaultCacheReads). Such a
// request sent through Options.Tollgate.Routes, or with Table's rules in a
// tollgate.Transport of your own, keeps its input estimate, which counts
// the cached tokens too.
//
// Anthropic then reports what it counted in the anthropic-ratelimit-*
// headers, and tollgate holds its count to them (Bucket.Follows): a count
// of its own below Anthropic's is corrected within a response.
type Counting struct {
	// BytesPerToken is the bytes of a request body counted as one input
	// token; 0 means DefaultBytesPerToken. Higher counts fewer, and may
	// count fewer than Anthropic does until the answer's usage settles it.
	BytesPerToken int64
	// ToolTokens is what a request that gives tools counts besides its
	// bytes; 0 means DefaultToolTokens.
	ToolTokens int64
	// InlineTokens, when positive, is what each inline (base64) image or
	// document counts instead of its bytes, e.g. 1600 for images: a 1 MB
	// image counts some 1,400,000 tokens by its bytes, more than an ITPM
	// holds, and is refused at once. 0 counts its bytes.
	InlineTokens int64
	// ReferenceTokens is what each image or document given by URL or file
	// id counts; 0 means DefaultReferenceTokens.
	ReferenceTokens int64
}

// check reports counts that are negative.
func (c Counting) check() bool {
	return c.BytesPerToken >= 0 && c.ToolTokens >= 0 && c.InlineTokens >= 0 && c.ReferenceTokens >= 0
}

func or(v, def int64) int64 {
	if v > 0 {
		return min(v, maxUnits)
	}
	return def
}

// input is the input tokens a request with these facts is charged: at
// least 1, at most maxUnits.
func (c Counting) input(f facts) int64 {
	size := f.size
	var media int64
	if c.InlineTokens > 0 {
		size -= f.inlineBytes
		media = mul(f.inline, c.InlineTokens)
	}
	size = max(size, 0)
	bpt := or(c.BytesPerToken, DefaultBytesPerToken)
	n := size / bpt
	if size%bpt != 0 {
		n++
	}
	n = add(n, media)
	n = add(n, mul(f.byReference, or(c.ReferenceTokens, DefaultReferenceTokens)))
	if f.tools {
		n = add(n, or(c.ToolTokens, DefaultToolTokens))
	}
	return max(n, 1)
}

// output is the output tokens a request is charged: its max_tokens, 0
// when it has none.
func (c Counting) output(f facts) int64 { return max(f.maxTokens, 0) }

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
