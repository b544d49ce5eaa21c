package openai

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/oaisim"
)

// paths are the APIs that count tokens, on OpenAI's paths.
var paths = []string{"/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions", "/v1/models"}

// bodies are requests as clients send them, and some they should not.
var bodies = []string{
	`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Où est la gare ? 駅はどこですか"}],"max_tokens":64}`,
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"\u00e9\ud83d\ude00"}],"n":3,"max_completion_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
	`{"model":"gpt-4.1","input":[{"role":"user","content":[{"type":"input_text","text":"hello"}]}],"instructions":"be nice","max_output_tokens":300}`,
	`{"model":"text-embedding-3-small","input":["one","two","three"]}`,
	`{"model":"text-embedding-3-small","input":[[1,2,3,4],[5,6]]}`,
	`{"model":"gpt-3.5-turbo-instruct","prompt":["a","b"],"max_tokens":16,"n":2,"best_of":3}`,
	`{"model":"gpt-4o","messages":[],"n":1e9,"max_tokens":-1}`,
	`{"model":5,"messages":"no"}`,
	`not json at all`,
	`[]`,
}

// FuzzEstimate feeds the request reader and the token count arbitrary
// bodies: they must never panic; a body they read is charged between 1
// and quota.MaxUnits tokens, and never fewer than the simulated upstream
// (internal/oaisim, which counts as OpenAI's rate limits guide says)
// counts for it when it accepts it.
//
//	go test ./providers/openai -run '^$' -fuzz FuzzEstimate -fuzztime 5m
func FuzzEstimate(f *testing.F) {
	for i, b := range bodies {
		f.Add(uint8(i), []byte(b))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		k := kindOf("POST", path)
		facts, err := parse(body)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("error %v does not match ErrBody", err)
			}
			return
		}
		for _, c := range []Counting{{}, {CharsPerToken: 1, OutputTokens: 1 << 62}, {MediaTokens: 1500}} {
			got := c.tokens(k, facts)
			if k == other {
				if got != 0 {
					t.Fatalf("%s charged %d tokens", path, got)
				}
				continue
			}
			if got < 1 || got > maxUnits {
				t.Fatalf("%s: %d tokens, out of [1, %d]", path, got, int64(maxUnits))
			}
			if c.MediaTokens > 0 {
				continue // counts inline files as told, not by their characters
			}
			if sim, err := oaisim.Count(path, body); err == nil && got < sim {
				t.Fatalf("%s: charged %d tokens, the upstream counts %d", path, got, sim)
			}
		}
	})
}

// FuzzUpstream feeds the 429 reader arbitrary bodies and headers: it must
// never panic, must leave the body whole, may only call a 429 spent, and
// pauses for a while that is positive and at most a year.
//
//	go test ./providers/openai -run '^$' -fuzz FuzzUpstream -fuzztime 5m
func FuzzUpstream(f *testing.F) {
	for _, fx := range upstreamFixtures {
		f.Add(fx.status, fx.header["Retry-After"], fx.header["X-Ratelimit-Reset-Tokens"], fx.header["X-Ratelimit-Remaining-Tokens"], []byte(fx.body))
	}
	read := Upstream()
	f.Fuzz(func(t *testing.T, status int, retryAfter, reset, remaining string, body []byte) {
		h := http.Header{"Retry-After": {retryAfter}, "Retry-After-Ms": {retryAfter}, "X-Ratelimit-Reset-Tokens": {reset}, "X-Ratelimit-Remaining-Tokens": {remaining}}
		resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
		v := read(resp, chatEndpoint)
		if v.Spent && status != http.StatusTooManyRequests {
			t.Fatalf("status %d read as spent", status)
		}
		if v.Spent && (v.Pause <= 0 || v.Pause > 366*24*time.Hour) {
			t.Fatalf("pause %v", v.Pause)
		}
		if v.Spent && isBilling(body) {
			t.Fatalf("a billing failure paused %v", v.Buckets)
		}
		rest, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(rest, body) {
			t.Fatalf("the body was not left whole")
		}
	})
}
