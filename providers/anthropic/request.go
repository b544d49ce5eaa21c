package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/tollgate/internal/provider"
)

// What tollgate reads of a request before it is sent: which API it calls,
// from its path, and, for the Messages API, what its JSON body tells of its
// cost. Reading never fails on a value of the wrong type or out of range:
// such a value counts as absent (the API answers such a request 400
// anyway); only a body that is not a JSON object is an error.

// ErrBody matches the errors about a request whose tokens cannot be
// counted: a body that is not a JSON object, or is larger than
// Options.MaxBody. Nothing was sent; retrying the same request cannot help.
var ErrBody = errors.New("anthropic: the request body cannot be counted")

// kind is which API a request calls.
type kind int

const (
	other       kind = iota // one request, no tokens
	messages                // POST .../messages
	countTokens             // POST .../messages/count_tokens: limits of its own
)

// kindOf names the API a request calls by the end of its path, so that
// Anthropic's /v1/messages and a gateway's path under any prefix are read
// alike.
func kindOf(method, path string) kind {
	if method != "POST" {
		return other
	}
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return countTokens
	case strings.HasSuffix(path, "/messages"):
		return messages
	}
	return other
}

// facts are what a Messages request body tells of its cost.
type facts struct {
	model string
	// size is the body's length in bytes.
	size int64
	// maxTokens is max_tokens, -1 when absent or not a positive integer.
	maxTokens int64
	stream    bool
	// tools reports tools given: the API adds its tool use system prompt.
	tools bool
	// cached reports a cache_control anywhere: the answer's input_tokens
	// then leaves out the tokens written to or read from the cache.
	cached bool
	// inline counts the base64 sources (images, documents) and
	// inlineBytes their data's length; byReference counts the sources given
	// by URL or file id, whose bytes are not in the body.
	inline, inlineBytes, byReference int64
}

// parse reads a Messages request body. It fails only when the body is not
// a JSON object.
func parse(body []byte) (facts, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if err == nil {
			err = errors.New("null")
		}
		return facts{}, fmt.Errorf("%w: not a JSON object: %v", ErrBody, err)
	}
	f := facts{size: int64(len(body)), maxTokens: provider.Count(top["max_tokens"]), stream: provider.IsTrue(top["stream"])}
	_ = json.Unmarshal(top["model"], &f.model) // not a string: no model
	var tools []json.RawMessage
	f.tools = json.Unmarshal(top["tools"], &tools) == nil && len(tools) > 0
	walk(body, &f)
	return f, nil
}

// walk reads the whole document for what its structure tells: a
// cache_control key at any depth, and the sources of images and
// documents: objects whose "type" is "base64" (their "data" inline), or
// "url" or "file" (by reference). Keys are compared decoded, as the API
// reads them. body must be valid JSON.
func walk(body []byte, f *facts) {
	type frame struct {
		object  bool
		keyed   bool   // in an object, a key was read: its value comes next
		key     string // that key
		typ     string
		dataLen int64
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []frame
	expectKey := func() bool {
		if len(stack) == 0 {
			return false
		}
		top := &stack[len(stack)-1]
		return top.object && !top.keyed
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) > 0 {
					parent := &stack[len(stack)-1]
					switch {
					case parent.object && parent.key == "type":
						parent.typ = ""
					case parent.object && parent.key == "data":
						parent.dataLen = 0
					}
					parent.keyed = false // the value of the key is this
				}
				stack = append(stack, frame{object: d == '{'})
			case '}', ']':
				fr := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if fr.object {
					switch fr.typ {
					case "base64":
						f.inline++
						f.inlineBytes += fr.dataLen
					case "url", "file":
						f.byReference++
					}
				}
			}
			continue
		}
		if expectKey() {
			k, _ := tok.(string)
			stack[len(stack)-1].key, stack[len(stack)-1].keyed = k, true
			if k == "cache_control" {
				f.cached = true
			}
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			top := &stack[len(stack)-1]
			s, _ := tok.(string) // "" for a value of another type
			switch top.key {
			case "type":
				top.typ = s
			case "data":
				top.dataLen = int64(len(s)) + 2 // its quotes: base64 holds no escapes
			}
			top.keyed = false
		}
	}
}
