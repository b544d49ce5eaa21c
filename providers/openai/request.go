package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/provider"
)

// What tollgate reads of a request before it is sent: which API it calls,
// from its path, and, for the APIs that count tokens, what its JSON body
// tells of its cost. Reading never fails on a value of the wrong type or
// out of range: such a value counts as absent (the upstream answers such a
// request 400 anyway); only a body that is not a JSON object is an error.

// ErrBody matches the errors about a request whose tokens cannot be
// counted: a body that is not a JSON object, or is larger than
// Options.MaxBody. Nothing was sent; retrying the same request cannot help.
var ErrBody = errors.New("openai: the request body cannot be counted")

// kind is which API a request calls.
type kind int

const (
	other       kind = iota // no tokens counted
	chat                    // POST .../chat/completions
	responses               // POST .../responses
	embeddings              // POST .../embeddings
	completions             // POST .../completions (the legacy API)
)

// kindOf names the API a request calls by the end of its path, so that
// OpenAI (/v1/...), Azure OpenAI (/openai/deployments/{name}/... and
// /openai/v1/...) and gateways under any prefix are read alike.
func kindOf(method, path string) kind {
	if method != "POST" {
		return other
	}
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return chat
	case strings.HasSuffix(path, "/completions"):
		return completions
	case strings.HasSuffix(path, "/responses"):
		return responses
	case strings.HasSuffix(path, "/embeddings"):
		return embeddings
	}
	return other
}

// deploymentOf returns the deployment an Azure OpenAI path names, e.g.
// "gpt4o-prod" in /openai/deployments/gpt4o-prod/chat/completions: Azure
// serves the deployment's model whatever the body's "model" says, and its
// limits are the deployment's
// (https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/quota).
func deploymentOf(path string) string {
	const seg = "/deployments/"
	i := strings.Index(path, seg)
	if i < 0 {
		return ""
	}
	name, _, _ := strings.Cut(path[i+len(seg):], "/")
	return name
}

// facts are what a request body tells of its cost.
type facts struct {
	model string
	// size is the body's length in characters; files and fileChars count
	// the inline files in it (base64 data: URLs) and their length.
	size, files, fileChars int64
	// ids counts the numbers in "input" and "prompt": token ids, when
	// text is sent already tokenized.
	ids int64
	// The output allowances, -1 when absent or not a positive integer.
	maxTokens, maxCompletionTokens, maxOutputTokens int64
	// The choices asked for, 0 when absent or not a positive integer.
	n, bestOf int64
	// stream asks for server-sent events; includeUsage asks a chat stream
	// for a last chunk that tells the usage.
	stream, includeUsage bool
}

// parse reads a request body. It fails only when the body is not a JSON
// object.
func parse(body []byte) (facts, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if err == nil {
			err = errors.New("null")
		}
		return facts{}, fmt.Errorf("%w: not a JSON object: %v", ErrBody, err)
	}
	f := facts{
		size:                int64(utf8.RuneCount(body)),
		maxTokens:           provider.Count(top["max_tokens"]),
		maxCompletionTokens: provider.Count(top["max_completion_tokens"]),
		maxOutputTokens:     provider.Count(top["max_output_tokens"]),
		n:                   max(provider.Count(top["n"]), 0),
		bestOf:              max(provider.Count(top["best_of"]), 0),
		stream:              provider.IsTrue(top["stream"]),
		ids:                 numbers(top["input"]) + numbers(top["prompt"]),
	}
	_ = json.Unmarshal(top["model"], &f.model) // not a string: no model
	if raw := top["stream_options"]; raw != nil {
		var opts map[string]json.RawMessage
		if json.Unmarshal(raw, &opts) == nil {
			f.includeUsage = provider.IsTrue(opts["include_usage"])
		}
	}
	f.files, f.fileChars = inlineFiles(body)
	return f, nil
}

// numbers counts the numbers anywhere in a JSON array, e.g. 3 in [[1, 2],
// [3]]: text sent as token ids, which the upstream counts one token each
// whatever their length in bytes. Anything else counts none.
func numbers(raw json.RawMessage) int64 {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return 0
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var n int64
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if _, ok := tok.(json.Number); ok {
			n++
		}
	}
}

// maxFilePrefix bounds where ";base64," must appear in a data: URL for it
// to be read as an inline file: "data:" and a media type, with parameters.
const maxFilePrefix = 256

// inlineFiles counts the JSON strings of body that are base64 data: URLs
// (images, audio and files sent inline, e.g.
// "data:image/png;base64,iVBOR..."), and their length in characters,
// quotes included. body must be valid JSON.
func inlineFiles(body []byte) (files, size int64) {
	in, esc, start := false, false, 0
	for i, c := range body {
		switch {
		case !in:
			if c == '"' {
				in, start = true, i
			}
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			in = false
			s := body[start+1 : i]
			if bytes.HasPrefix(s, []byte("data:")) && bytes.Contains(s[:min(len(s), maxFilePrefix)], []byte(";base64,")) {
				files++
				size += int64(utf8.RuneCount(body[start : i+1]))
			}
		}
	}
	return files, size
}
