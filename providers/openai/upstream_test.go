package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// chatEndpoint is what a chat completion resolves to.
var chatEndpoint = costs.Endpoint{Name: "chat.completions", Charges: []costs.Charge{{Bucket: Requests, Units: 1}, {Bucket: Tokens, Units: 500}}}

// The error bodies, as published where each is cited.
const (
	// https://github.com/Pythagora-io/gpt-pilot/pull/53 (raw HTTP)
	bodyRateTokens = "{\n    \"error\": {\n        \"message\": \"Rate limit reached for 10KTPM-200RPM in organization org-OASFC7k1Ff5IzueeLArhQtnT on tokens per min. Limit: 10000 / min. Please try again in 6ms. Contact us through our help center at help.openai.com if you continue to have issues.\",\n        \"type\": \"tokens\",\n        \"param\": null,\n        \"code\": \"rate_limit_exceeded\"\n    }\n}"
	// https://github.com/ChatGPTNextWeb/NextChat/issues/3123
	bodyBilling = "{\n  \"error\": {\n    \"message\": \"You exceeded your current quota, please check your plan and billing details.\",\n    \"type\": \"insufficient_quota\",\n    \"param\": null,\n    \"code\": \"insufficient_quota\"\n  }\n}"
	// https://github.com/ChatGPTNextWeb/NextChat/issues/1792: the older form, code null
	bodyBillingCodeNull = "{\n  \"error\": {\n    \"message\": \"You exceeded your current quota, please check your plan and billing details.\",\n    \"type\": \"insufficient_quota\",\n    \"param\": null,\n    \"code\": null\n  }\n}"
	// https://github.com/dragon1086/prism-insight/issues/48 (its message, in OpenAI's envelope)
	bodyTooLarge = `{"error":{"message":"Request too large for gpt-4.1 in organization org-H804Ggv7sCGgufN5KM1WhLbu on tokens per min (TPM): Limit 30000, Requested 56336. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	// https://github.com/alex-wolf-ps/dbchatprov2/issues/2 (Azure OpenAI's message, in its envelope)
	bodyAzure = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-05-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
	// https://github.com/semanser/codel/issues/72 (its message, in OpenAI's envelope)
	bodyRateRequests = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-XXXXXXXXX on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
)

// upstreamFixture is a response and what the reader must make of it.
type upstreamFixture struct {
	name    string
	status  int
	header  map[string]string
	body    string
	spent   bool
	buckets []string
	pause   time.Duration
}

var upstreamFixtures = []upstreamFixture{
	{"tokens spent, reset in 6ms", 429, map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6ms", "X-Ratelimit-Remaining-Requests": "199"},
		bodyRateTokens, true, []string{Tokens}, minPause},
	{"tokens spent, Retry-After wins", 429, map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6ms", "Retry-After": "20"},
		bodyRateTokens, true, []string{Tokens}, 20 * time.Second},
	{"Retry-After-Ms before Retry-After", 429, map[string]string{"Retry-After-Ms": "1500", "Retry-After": "20"},
		bodyRateTokens, true, []string{Tokens}, 1500 * time.Millisecond},
	{"the error's type names the bucket", 429, map[string]string{"X-Ratelimit-Reset-Requests": "20s"},
		bodyRateRequests, true, []string{Requests}, 20 * time.Second},
	{"both spent: the later reset", 429, map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "2s",
		"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1m0s"},
		bodyRateTokens, true, []string{Requests, Tokens}, time.Minute},
	{"hostile headers are ignored", 429, map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "99999999h", "Retry-After": "-3", "Retry-After-Ms": "NaN"},
		bodyRateTokens, true, []string{Tokens}, DefaultRatePause},
	{"insufficient_quota pauses nothing", 429, map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1s"},
		bodyBilling, false, nil, 0},
	{"insufficient_quota, code null", 429, nil, bodyBillingCodeNull, false, nil, 0},
	{"a request too large pauses nothing", 429, nil, bodyTooLarge, false, nil, 0},
	{"Azure's 429: the model pauses", 429, map[string]string{"Retry-After": "86400"}, bodyAzure, true, nil, 24 * time.Hour},
	{"a 429 that says nothing", 429, nil, "", true, nil, DefaultRatePause},
	{"a 200 with nothing left is no refusal", 200, map[string]string{"X-Ratelimit-Remaining-Tokens": "0"}, `{}`, false, nil, 0},
	{"other errors are not quota", 503, nil, `{"error":{"message":"Slow Down"}}`, false, nil, 0},
}

func TestUpstream(t *testing.T) {
	read := Upstream()
	for _, fx := range upstreamFixtures {
		t.Run(fx.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range fx.header {
				h.Set(k, v)
			}
			resp := &http.Response{StatusCode: fx.status, Header: h, Body: io.NopCloser(strings.NewReader(fx.body))}
			v := read(resp, chatEndpoint)
			if v.Spent != fx.spent || !slices.Equal(v.Buckets, fx.buckets) || v.Pause != fx.pause {
				t.Errorf("verdict %+v; want spent %v, buckets %v, pause %v", v, fx.spent, fx.buckets, fx.pause)
			}
			rest, _ := io.ReadAll(resp.Body)
			if string(rest) != fx.body {
				t.Errorf("the body left for the caller is %q", rest)
			}
		})
	}
}

func TestBillingError(t *testing.T) {
	if isBilling([]byte(bodyRateTokens)) || !isBilling([]byte(bodyBilling)) || !isBilling([]byte(bodyBillingCodeNull)) {
		t.Fatal("isBilling misreads the fixtures")
	}
	err := billingError("chat.completions", "cred-x/gpt-4o", []byte(`{"error":{"type":"insufficient_quota","message":"line one\nline two `+strings.Repeat("é", 300)+`"}}`))
	if !errors.Is(err, ErrInsufficientQuota) || errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("%v: want an error matching ErrInsufficientQuota and not tollgate.ErrQuotaExhausted", err)
	}
	if strings.ContainsAny(err.Message, "\n\r") || len([]rune(err.Message)) != 200 {
		t.Errorf("message %q: want control characters out, 200 characters kept", err.Message)
	}
}

func TestCheckRetry(t *testing.T) {
	always := func(context.Context, *http.Response, error) (bool, error) { return true, nil }
	check := CheckRetry(always)
	for _, err := range []error{
		&BillingError{Endpoint: "chat.completions"},
		ErrBody,
		&tollgate.QuotaError{Endpoint: "chat.completions"},
	} {
		if retry, _ := check(context.Background(), nil, err); retry {
			t.Errorf("%v is retried", err)
		}
	}
	billing := &http.Response{StatusCode: 429, Body: io.NopCloser(strings.NewReader(bodyBilling))}
	if retry, _ := check(context.Background(), billing, nil); retry {
		t.Error("a 429 insufficient_quota response is retried")
	}
	if rest, _ := io.ReadAll(billing.Body); string(rest) != bodyBilling {
		t.Errorf("the body left is %q", rest)
	}
	rate := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(bodyRateTokens))}
	if retry, _ := check(context.Background(), rate, nil); !retry {
		t.Error("a 429 rate limit response is not left to the base policy")
	}
	if retry, _ := check(context.Background(), &http.Response{StatusCode: 500, Body: io.NopCloser(bytes.NewReader(nil))}, nil); !retry {
		t.Error("a 500 is not left to the base policy")
	}
}
