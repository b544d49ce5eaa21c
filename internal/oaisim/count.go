package oaisim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// How the Server counts a request's tokens when it arrives, as OpenAI's
// rate limits guide describes it
// (https://developers.openai.com/api/docs/guides/rate-limits): "the
// maximum of max_tokens and the estimated number of tokens based on the
// character count of your request", read as the prompt's estimate plus
// the output allowance of every choice. The prompt's estimate is its
// characters of text (every string in messages, input, prompt and
// instructions, in runes) divided by 4, rounded up ("one token generally
// corresponds to ~4 characters of text",
// https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them),
// plus one per token id sent as a number in input or prompt. The
// allowance is max_completion_tokens or max_tokens (the larger),
// max_output_tokens for Responses, or DefaultMaxTokens when the request
// sets none; embeddings have none. Choices are n, or for the legacy
// Completions the larger of n and best_of.

// DefaultMaxTokens is the output allowance counted for a request that sets
// none.
const DefaultMaxTokens = 4096

// Bounds of the values the Server accepts, as OpenAI refuses others.
const (
	maxChoices   = 128
	maxAllowance = 1 << 20
)

// errInvalid marks a request OpenAI would answer 400 invalid_request_error.
var errInvalid = errors.New("invalid request")

// api names the APIs the Server serves, by the end of their path.
type api string

const (
	chatAPI        api = "chat.completions"
	responsesAPI   api = "responses"
	embeddingsAPI  api = "embeddings"
	completionsAPI api = "completions"
)

// apiOf names the API of a POST by the end of its path, or "".
func apiOf(path string) api {
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return chatAPI
	case strings.HasSuffix(path, "/completions"):
		return completionsAPI
	case strings.HasSuffix(path, "/responses"):
		return responsesAPI
	case strings.HasSuffix(path, "/embeddings"):
		return embeddingsAPI
	}
	return ""
}

// request is what the Server reads of a request to one of its APIs.
type request struct {
	api          api
	model        string
	prompt       int64 // the prompt's estimate, in tokens
	allowance    int64 // output tokens per choice; 0 for embeddings
	choices      int64
	inputs       int // embeddings: how many inputs, each answered a vector
	stream       bool
	includeUsage bool // a chat stream asked for its usage chunk
}

// tokens is what the request counts against TPM when it arrives.
func (r request) tokens() int64 { return r.prompt + r.choices*r.allowance }

// Count returns the tokens a request to the API at path (a POST to
// .../chat/completions, .../responses, .../embeddings or .../completions)
// counts against the model's TPM when it arrives, as the Server counts
// them; an error when the Server would refuse it with 400.
func Count(path string, body []byte) (int64, error) {
	r, err := readRequest(apiOf(path), body)
	if err != nil {
		return 0, err
	}
	return r.tokens(), nil
}

// readRequest reads a request body to API a.
func readRequest(a api, body []byte) (request, error) {
	if a == "" {
		return request{}, fmt.Errorf("%w: unknown API", errInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil || top == nil || dec.More() {
		return request{}, fmt.Errorf("%w: the body is not a JSON object", errInvalid)
	}
	r := request{api: a, choices: 1}
	var ok bool
	if r.model, ok = top["model"].(string); !ok || r.model == "" {
		return request{}, fmt.Errorf("%w: you must provide a model parameter", errInvalid)
	}
	var chars, ids int64
	for _, field := range []string{"messages", "input", "prompt", "instructions"} {
		c, n := text(top[field], field == "input" || field == "prompt")
		chars, ids = chars+c, ids+n
	}
	r.prompt = (chars+3)/4 + ids
	var err error
	integer := func(field string, lo, hi int64) (int64, bool) {
		v, present := top[field]
		if !present || v == nil || err != nil {
			return 0, false
		}
		n, isNum := v.(json.Number)
		x, perr := n.Int64()
		if !isNum || perr != nil || x < lo || x > hi {
			err = fmt.Errorf("%w: %s must be an integer from %d to %d", errInvalid, field, lo, hi)
			return 0, false
		}
		return x, true
	}
	allowance := int64(-1)
	switch a {
	case chatAPI:
		if _, isList := top["messages"].([]any); !isList {
			return request{}, fmt.Errorf("%w: messages must be an array", errInvalid)
		}
		for _, f := range []string{"max_tokens", "max_completion_tokens"} {
			if x, ok := integer(f, 1, maxAllowance); ok {
				allowance = max(allowance, x)
			}
		}
		if x, ok := integer("n", 1, maxChoices); ok {
			r.choices = x
		}
	case completionsAPI:
		if x, ok := integer("max_tokens", 1, maxAllowance); ok {
			allowance = x
		}
		for _, f := range []string{"n", "best_of"} {
			if x, ok := integer(f, 1, maxChoices); ok {
				r.choices = max(r.choices, x)
			}
		}
	case responsesAPI:
		if x, ok := integer("max_output_tokens", 1, maxAllowance); ok {
			allowance = x
		}
	case embeddingsAPI:
		switch in := top["input"].(type) {
		case string:
			r.inputs = 1
		case []any:
			r.inputs = len(in)
			if len(in) > 0 {
				if _, tokens := in[0].(json.Number); tokens {
					r.inputs = 1 // one text, as token ids
				}
			}
		}
		if r.inputs == 0 {
			return request{}, fmt.Errorf("%w: input must be a string or a non-empty array", errInvalid)
		}
		allowance = 0
	}
	if err != nil {
		return request{}, err
	}
	if allowance < 0 {
		allowance = DefaultMaxTokens
	}
	r.allowance = allowance
	if s, ok := top["stream"].(bool); ok {
		r.stream = s
	}
	if opts, ok := top["stream_options"].(map[string]any); ok {
		r.includeUsage, _ = opts["include_usage"].(bool)
	}
	return r, nil
}

// text counts the characters of every string in v, and, when numbers
// are token ids, the numbers inside its arrays.
func text(v any, idsAllowed bool) (chars, ids int64) {
	switch v := v.(type) {
	case string:
		return int64(utf8.RuneCountInString(v)), 0
	case []any:
		for _, x := range v {
			if _, isNum := x.(json.Number); isNum && idsAllowed {
				ids++
				continue
			}
			c, n := text(x, idsAllowed)
			chars, ids = chars+c, ids+n
		}
	case map[string]any:
		for _, x := range v {
			c, n := text(x, false)
			chars, ids = chars+c, ids+n
		}
	}
	return chars, ids
}
