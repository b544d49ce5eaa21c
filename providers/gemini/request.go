package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// What tollgate reads of a request before it is sent: the model and the
// method, from its path, and, for the methods that spend a model's quota,
// what its JSON body tells of its cost. A value of the wrong type counts
// as absent (Google answers such a request 400 anyway); only a body that
// is not a JSON object is an error.

// ErrBody matches the errors about a request whose tokens cannot be
// counted: a body that is not a JSON object, or is larger than
// Options.MaxBody. Nothing was sent; retrying the same request cannot help.
var ErrBody = errors.New("gemini: the request body cannot be counted")

// method is which API method a request calls.
type method int

const (
	other          method = iota // not a model's method: free
	generate                     // models/{model}:generateContent
	stream                       // models/{model}:streamGenerateContent
	embed                        // models/{model}:embedContent
	batchEmbed                   // models/{model}:batchEmbedContents
	countTokensFor               // models/{model}:countTokens: free
)

// methodNames name the methods, as the API does, in the cost table, the
// policies and the errors.
var methodNames = map[method]string{
	other:          "other",
	generate:       "generateContent",
	stream:         "streamGenerateContent",
	embed:          "embedContent",
	batchEmbed:     "batchEmbedContents",
	countTokensFor: "countTokens",
}

// methodOf reads a request's method and model from its path, whatever
// comes before "models/" (v1beta, v1, a gateway's prefix): the methods
// are POST .../models/{model}:{method} (API reference,
// https://ai.google.dev/api/generate-content,
// https://ai.google.dev/api/embeddings,
// https://ai.google.dev/api/tokens).
func methodOf(httpMethod, path string) (method, string) {
	if httpMethod != "POST" {
		return other, ""
	}
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return other, ""
	}
	model, name, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return other, ""
	}
	for m, n := range methodNames {
		if m != other && n == name {
			return m, model
		}
	}
	return other, ""
}

// facts are what a request body tells of its cost.
type facts struct {
	// requests is how many requests it counts: the requests of a batch of
	// embeddings, 1 otherwise.
	requests int64
	// text counts the bytes of ASCII text in its strings, and wide the
	// other characters; inline data excepted.
	text, wide int64
	// media are its inline parts.
	media []media
	// uris counts the parts given by URI (fileData), whose size the body
	// does not show.
	uris int
}

// media is an inline part: its MIME type and its data, still in base64.
type media struct {
	mimeType, data string
}

// parse reads a request body of method m. It fails only when the body is
// not a JSON object.
func parse(m method, body []byte) (facts, error) {
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if err == nil {
			err = errors.New("null")
		}
		return facts{}, fmt.Errorf("%w: not a JSON object: %v", ErrBody, err)
	}
	f := facts{requests: 1}
	if m == batchEmbed {
		reqs, _ := top["requests"].([]any)
		f.requests = max(int64(len(reqs)), 1)
	}
	f.walk(top)
	return f, nil
}

// maxDepth bounds how deep walk goes: JSON nested deeper is counted as its
// text would be, never skipped.
const maxDepth = 64

// walk counts the strings of v, its inline data and its parts by URI.
func (f *facts) walk(v any) { f.walkDepth(v, 0) }

func (f *facts) walkDepth(v any, depth int) {
	switch v := v.(type) {
	case string:
		f.count(v)
	case []any:
		for _, e := range v {
			f.walkDepth(e, depth+1)
		}
	case map[string]any:
		for k, e := range v {
			switch k {
			case "inlineData", "inline_data":
				if d, ok := e.(map[string]any); ok {
					if m, ok := mediaOf(d); ok {
						f.media = append(f.media, m)
						continue
					}
				}
			case "fileData", "file_data":
				if _, ok := e.(map[string]any); ok {
					f.uris++
				}
			}
			f.count(k)
			if depth < maxDepth {
				f.walkDepth(e, depth+1)
			} else {
				b, _ := json.Marshal(e)
				f.count(string(b))
			}
		}
	}
}

// count counts a string's characters.
func (f *facts) count(s string) {
	for _, r := range s {
		if r < 0x80 {
			f.text++
		} else {
			f.wide++
		}
	}
}

// mediaOf reads an inline part's {mimeType, data}.
func mediaOf(d map[string]any) (media, bool) {
	data, ok := d["data"].(string)
	if !ok {
		return media{}, false
	}
	mt, _ := d["mimeType"].(string)
	if mt == "" {
		mt, _ = d["mime_type"].(string)
	}
	return media{mimeType: strings.ToLower(strings.TrimSpace(mt)), data: data}, true
}

// decodedLen is the length of base64 data once decoded (of its valid
// characters' worth, padding aside).
func decodedLen(data string) int64 {
	return int64(len(strings.TrimRight(data, "="))) * 3 / 4
}
