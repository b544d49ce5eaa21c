package openai

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// prompt is the prompt estimate of a body at 4 characters a token.
func prompt(body string) int64 { return (int64(utf8.RuneCountInString(body)) + 3) / 4 }

func TestTokens(t *testing.T) {
	image := `"data:image/png;base64,` + strings.Repeat("iVBORw0K", 1000) + `"`
	cases := []struct {
		name string
		kind kind
		c    Counting
		body string
		want func(body string) int64
	}{
		{"chat, max_tokens", chat, Counting{},
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`,
			func(b string) int64 { return prompt(b) + 100 }},
		{"chat, n choices", chat, Counting{},
			`{"model":"gpt-4o","messages":[],"max_tokens":100,"n":3}`,
			func(b string) int64 { return prompt(b) + 300 }},
		{"chat, the larger allowance", chat, Counting{},
			`{"model":"o3","messages":[],"max_tokens":100,"max_completion_tokens":700}`,
			func(b string) int64 { return prompt(b) + 700 }},
		{"chat, no allowance: the default", chat, Counting{},
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			func(b string) int64 { return prompt(b) + DefaultOutputTokens }},
		{"chat, no allowance: the configured default", chat, Counting{OutputTokens: 512},
			`{"model":"gpt-4o","messages":[]}`,
			func(b string) int64 { return prompt(b) + 512 }},
		{"chat, allowance as 1e2", chat, Counting{},
			`{"model":"gpt-4o","messages":[],"max_tokens":1e2}`,
			func(b string) int64 { return prompt(b) + 100 }},
		{"chat, allowances the API refuses count as absent", chat, Counting{},
			`{"model":"gpt-4o","messages":[],"max_tokens":-5,"max_completion_tokens":"900","n":0}`,
			func(b string) int64 { return prompt(b) + DefaultOutputTokens }},
		{"chat, fractional n", chat, Counting{},
			`{"model":"gpt-4o","messages":[],"max_tokens":10,"n":2.5}`,
			func(b string) int64 { return prompt(b) + 10 }},
		{"chat, absurd n stops at the most units", chat, Counting{},
			`{"model":"gpt-4o","messages":[],"max_tokens":100000,"n":1e300}`,
			func(string) int64 { return maxUnits }},
		{"chat, 16 characters a token", chat, Counting{CharsPerToken: 16},
			`{"model":"gpt-4o","messages":[],"max_tokens":10}`,
			func(b string) int64 { return (int64(len(b))+15)/16 + 10 }},
		{"characters, not bytes: 56 characters in 66 bytes", chat, Counting{},
			`{"model":"m","messages":[{"content":"駅 東京 🚀 où"}],"n":1}`,
			func(string) int64 { return 14 + DefaultOutputTokens }},
		{"chat, inline image by its bytes", chat, Counting{},
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":` + image + `}}]}],"max_tokens":10}`,
			func(b string) int64 { return prompt(b) + 10 }},
		{"chat, inline image as MediaTokens", chat, Counting{MediaTokens: 1500},
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":` + image + `}}]}],"max_tokens":10}`,
			func(b string) int64 { return prompt(strings.Replace(b, image, "", 1)) + 1500 + 10 }},
		{"a text that merely starts with data: is text", chat, Counting{MediaTokens: 1500},
			`{"model":"gpt-4o","messages":[{"role":"user","content":"data: 3 rows"}],"max_tokens":10}`,
			func(b string) int64 { return prompt(b) + 10 }},
		{"responses, max_output_tokens", responses, Counting{},
			`{"model":"gpt-4.1","input":"write a haiku","max_output_tokens":64,"max_tokens":9000}`,
			func(b string) int64 { return prompt(b) + 64 }},
		{"responses, no allowance", responses, Counting{},
			`{"model":"gpt-4.1","input":"write a haiku"}`,
			func(b string) int64 { return prompt(b) + DefaultOutputTokens }},
		{"embeddings, text: no allowance", embeddings, Counting{},
			`{"model":"text-embedding-3-small","input":["a","b"],"max_tokens":500}`,
			func(b string) int64 { return prompt(b) }},
		{"embeddings, token ids count one each", embeddings, Counting{},
			`{"model":"text-embedding-3-small","input":[[1,2,3],[4,5]]}`,
			func(b string) int64 { return prompt(b) + 5 }},
		{"completions, best_of over n", completions, Counting{},
			`{"model":"gpt-3.5-turbo-instruct","prompt":"Say","max_tokens":20,"n":2,"best_of":5}`,
			func(b string) int64 { return prompt(b) + 5*20 }},
		{"completions, prompt as token ids", completions, Counting{},
			`{"model":"gpt-3.5-turbo-instruct","prompt":[9,9,9],"max_tokens":1}`,
			func(b string) int64 { return prompt(b) + 3 + 1 }},
		{"other: no tokens", other, Counting{}, `{"model":"dall-e-3","n":4}`,
			func(string) int64 { return 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, want := tc.c.tokens(tc.kind, f), tc.want(tc.body)
			if got != want {
				t.Errorf("charged %d tokens, want %d", got, want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	f, err := parse([]byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"Model":"other"}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.model != "gpt-4o" || !f.stream || !f.includeUsage {
		t.Errorf("read %+v; want model gpt-4o (keys match exactly), a stream asking for usage", f)
	}
	// Duplicate keys: the last wins, as in the upstream's JSON reader.
	if f, _ := parse([]byte(`{"max_tokens":10,"max_tokens":900}`)); f.maxTokens != 900 {
		t.Errorf("max_tokens %d, want the last one, 900", f.maxTokens)
	}
	for _, body := range []string{``, `null`, `[1,2]`, `"text"`, `{"model":`, `{"a":1} {"b":2}`, "\xff\xfe", strings.Repeat("[", 20000)} {
		if _, err := parse([]byte(body)); !errors.Is(err, ErrBody) {
			t.Errorf("parse(%.20q): %v, want an error matching ErrBody", body, err)
		}
	}
}

func TestKindOf(t *testing.T) {
	cases := []struct {
		method, path string
		want         kind
	}{
		{"POST", "/v1/chat/completions", chat},
		{"POST", "/openai/deployments/gpt4o-prod/chat/completions", chat},
		{"POST", "/gateway/openai/v1/chat/completions/", chat},
		{"POST", "/v1/completions", completions},
		{"POST", "/v1/responses", responses},
		{"POST", "/openai/v1/embeddings", embeddings},
		{"GET", "/v1/chat/completions", other},
		{"GET", "/v1/responses/resp_123", other},
		{"POST", "/v1/responses/resp_123/cancel", other},
		{"POST", "/v1/images/generations", other},
	}
	for _, tc := range cases {
		if got := kindOf(tc.method, tc.path); got != tc.want {
			t.Errorf("kindOf(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
	if d := deploymentOf("/openai/deployments/gpt4o-prod/chat/completions"); d != "gpt4o-prod" {
		t.Errorf("deployment %q, want gpt4o-prod", d)
	}
	if d := deploymentOf("/v1/chat/completions"); d != "" {
		t.Errorf("deployment %q, want none", d)
	}
}
