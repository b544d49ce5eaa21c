package anthropic

import (
	"strings"
	"testing"
)

func TestEstimate(t *testing.T) {
	text := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"où est la gare ?"}]}`
	img := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
		strings.Repeat("A", 1000) + `"}},{"type":"text","text":"what is it?"}]}]}`
	ref := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},` +
		`{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}`
	tools := `{"model":"m","max_tokens":5,"tools":[{"name":"get","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`
	cached := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	escaped := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"rules","cache\u005fcontrol":{"type":"ephemeral"}}],"messages":[]}`
	n := func(s string) int64 { return int64(len(s)) }
	for _, c := range []struct {
		name                string
		body                string
		counting            Counting
		input, output       int64
		cached, stream, bad bool
	}{
		{"text: a token per byte", text, Counting{}, n(text), 100, false, false, false},
		{"text: 4 bytes a token, rounded up", text, Counting{BytesPerToken: 4}, (n(text) + 3) / 4, 100, false, false, false},
		{"inline image by its bytes", img, Counting{}, n(img), 5, false, false, false},
		{"inline image counted InlineTokens", img, Counting{InlineTokens: 1600}, n(img) - 1002 + 1600, 5, false, false, false},
		{"by reference", ref, Counting{}, n(ref) + 2*DefaultReferenceTokens, 5, false, false, false},
		{"by reference, given", ref, Counting{ReferenceTokens: 10}, n(ref) + 20, 5, false, false, false},
		{"tools", tools, Counting{}, n(tools) + DefaultToolTokens, 5, false, false, false},
		{"tools, given", tools, Counting{ToolTokens: 7}, n(tools) + 7, 5, false, false, false},
		{"cache_control", cached, Counting{}, n(cached), 5, true, false, false},
		{"cache_control escaped", escaped, Counting{}, n(escaped), 5, true, false, false},
		{"stream", `{"model":"m","max_tokens":1e2,"stream":true}`, Counting{}, 44, 100, false, true, false},
		{"max_tokens absent", `{"model":"m"}`, Counting{}, 13, 0, false, false, false},
		{"max_tokens a string", `{"max_tokens":"9"}`, Counting{}, 18, 0, false, false, false},
		{"max_tokens negative", `{"max_tokens":-9}`, Counting{}, 17, 0, false, false, false},
		{"max_tokens fractional", `{"max_tokens":9.5}`, Counting{}, 18, 0, false, false, false},
		{"max_tokens huge", `{"max_tokens":1e300}`, Counting{}, 20, maxUnits, false, false, false},
		{"an empty object", `{}`, Counting{}, 2, 0, false, false, false},
		{"not an object", `[1]`, Counting{}, 0, 0, false, false, true},
		{"null", `null`, Counting{}, 0, 0, false, false, true},
		{"not JSON", `{"model":`, Counting{}, 0, 0, false, false, true},
	} {
		f, err := parse([]byte(c.body))
		if c.bad {
			if err == nil {
				t.Errorf("%s: parse(%s) succeeded, want ErrBody", c.name, c.body)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if in, out := c.counting.input(f), c.counting.output(f); in != c.input || out != c.output || f.cached != c.cached || f.stream != c.stream {
			t.Errorf("%s: input %d, output %d, cached %v, stream %v; want %d, %d, %v, %v", c.name, in, out, f.cached, f.stream, c.input, c.output, c.cached, c.stream)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         kind
	}{
		{"POST", "/v1/messages", messages},
		{"POST", "/v1/messages/", messages},
		{"POST", "/gateway/anthropic/v1/messages", messages},
		{"POST", "/v1/messages/count_tokens", countTokens},
		{"POST", "/v1/messages/batches", other},
		{"GET", "/v1/messages", other},
		{"GET", "/v1/models", other},
	} {
		if got := kindOf(c.method, c.path); got != c.want {
			t.Errorf("kindOf(%s %s) = %d, want %d", c.method, c.path, got, c.want)
		}
	}
}

func TestModelClass(t *testing.T) {
	for model, want := range map[string]string{
		"claude-opus-4-1-20250805":   "claude-opus-4",
		"claude-opus-4-5":            "claude-opus-4",
		"claude-sonnet-4-5-20250929": "claude-sonnet-4",
		"claude-sonnet-4-0":          "claude-sonnet-4",
		"claude-haiku-4-5":           "claude-haiku-4",
		"claude-3-5-haiku-20241022":  "claude-3-5-haiku",
		"claude-3-5-haiku-latest":    "claude-3-5-haiku",
		"claude-3-haiku-20240307":    "claude-3-haiku",
		"my-model":                   "my-model",
		"":                           "",
	} {
		if got := ModelClass(model); got != want {
			t.Errorf("ModelClass(%q) = %q, want %q", model, got, want)
		}
	}
}
