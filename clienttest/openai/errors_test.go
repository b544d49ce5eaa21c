package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/internal/oaisim"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/quota"
)

// newAPI serves a simulated API and returns a Transport in front of it,
// on an in-process Redis.
func newAPI(t *testing.T, cfg oaisim.Config) (*oaisim.Server, string, *openai.Transport) {
	t.Helper()
	sim := oaisim.New(cfg)
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	tr, err := openai.NewTransport(nil, &openai.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return sim, api.URL, tr
}

// TestInsufficientQuotaIsNotRetried: OpenAI's client, with its default
// two retries, meets a key without credits: it gets its own typed error
// at once, streamed or not, and the upstream sees each call once.
func TestInsufficientQuotaIsNotRetried(t *testing.T) {
	sim, api, tr := newAPI(t, oaisim.Config{Broke: []string{"sk-broke"}})
	c := oai.NewClient(option.WithHTTPClient(&http.Client{Transport: tr}), option.WithBaseURL(api+"/v1/"), option.WithAPIKey("sk-broke"))
	params := oai.ChatCompletionNewParams{Model: chatModel, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}, MaxTokens: oai.Int(10)}

	_, err := c.Chat.Completions.New(context.Background(), params)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "insufficient_quota" {
		t.Fatalf("got %v; want an *openai.Error 429 insufficient_quota", err)
	}
	s := c.Chat.Completions.NewStreaming(context.Background(), params)
	for s.Next() {
	}
	if err := s.Err(); !errors.As(err, &apiErr) || apiErr.Code != "insufficient_quota" {
		t.Fatalf("streaming: got %v; want an *openai.Error insufficient_quota", err)
	}
	s.Close()
	if n := len(sim.Arrivals()); n != 2 {
		t.Errorf("the upstream saw %d requests for 2 calls: the client retried", n)
	}

	// Without the SDK, the Transport's own typed error.
	req, _ := http.NewRequest("POST", api+"/v1/embeddings", strings.NewReader(`{"model":"`+embedModel+`","input":"hi"}`))
	req.Header.Set("Authorization", "Bearer sk-broke")
	_, err = (&http.Client{Transport: tr}).Do(req)
	var be *openai.BillingError
	if !errors.As(err, &be) || !errors.Is(err, openai.ErrInsufficientQuota) || be.Endpoint != "embeddings" {
		t.Errorf("plain http.Client: got %v; want a *openai.BillingError", err)
	}
}

// TestBadInput: requests OpenAI's client lets through that tollgate must
// read: no max_tokens (charged the documented default), an absurd n
// (refused before sending, and not retried by the SDK into the upstream),
// hostile organization and project values.
func TestBadInput(t *testing.T) {
	sim, api, tr := newAPI(t, oaisim.Config{Models: map[string]oaisim.Limits{chatModel: {RPM: 100, TPM: 100000}}})
	c := oai.NewClient(option.WithHTTPClient(&http.Client{Transport: tr}), option.WithBaseURL(api+"/v1/"), option.WithAPIKey("sk-bad"),
		option.WithMaxRetries(0))
	ctx := context.Background()
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}

	if _, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: chatModel, Messages: msgs}); err != nil {
		t.Fatalf("no max_tokens: %v", err)
	}
	scope := openai.Scope("sk-bad", "", "", chatModel)
	u, err := tr.Usage(ctx, scope, openai.Tokens)
	if err != nil || len(u) == 0 || u[0].Used < openai.DefaultOutputTokens {
		t.Fatalf("no max_tokens: %+v %v; want at least the default allowance of %d tokens counted", u, err, openai.DefaultOutputTokens)
	}

	_, err = c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: chatModel, Messages: msgs, MaxTokens: oai.Int(100), N: oai.Int(1 << 40)})
	if !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Errorf("absurd n: got %v; want quota.ErrCostExceedsLimit", err)
	}
	if n := len(sim.Arrivals()); n != 1 {
		t.Errorf("%d requests reached the upstream, want the 1 with no max_tokens", n)
	}

	hostile := oai.NewClient(option.WithHTTPClient(&http.Client{Transport: tr}), option.WithBaseURL(api+"/v1/"), option.WithAPIKey("sk-bad"),
		option.WithOrganization("{org}\t\"';--"), option.WithProject(strings.Repeat("p", 4000)), option.WithMaxRetries(0))
	if _, err := hostile.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: chatModel, Messages: msgs, MaxTokens: oai.Int(5)}); err != nil {
		t.Errorf("hostile organization and project: %v", err)
	}
}
