package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/oaisim"
	"github.com/tollgate/tollgate/internal/providertest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/quota"
)

const key = "sk-proj-test-0123456789"

// harness is a Transport in front of a simulated API, served in memory.
type harness struct {
	t   *testing.T
	sim *oaisim.Server
	tr  *openai.Transport

	mu        sync.Mutex
	decisions []tollgate.Decision
}

// newHarness starts a simulator and a Transport (on rdb; nil: in-process).
func newHarness(t *testing.T, cfg oaisim.Config, rdb redis.UniversalClient, opts openai.Options) *harness {
	t.Helper()
	h := &harness{t: t, sim: oaisim.New(cfg)}
	if opts.Base == nil {
		opts.Base = providertest.Served{Handler: h.sim}
	}
	opts.Tollgate.Trace.Decided = func(_ context.Context, d tollgate.Decision) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.decisions = append(h.decisions, d)
	}
	tr, err := openai.NewTransport(rdb, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	h.tr = tr
	return h
}

// post sends a request with body to path with the key (and headers), and
// reads its answer whole.
func (h *harness) post(path, body string, header ...string) (*http.Response, string, error) {
	h.t.Helper()
	req, err := http.NewRequest("POST", "https://api.openai.com"+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return providertest.Send(h.tr, req)
}

// used returns what the Transport counts in a scope's bucket: units used,
// and the limit enforced.
func (h *harness) used(scope, bucket string) (int64, int64) {
	h.t.Helper()
	return providertest.Used(h.t, h.tr, scope, bucket)
}

// simTokens sums what the simulator counted for a model's successes.
func (h *harness) simTokens(model string) (tokens int64, requests int) {
	for _, a := range h.sim.Arrivals() {
		if a.Model == model {
			tokens += a.Tokens
			requests++
		}
	}
	return tokens, requests
}

// chat is a chat completion's body.
func chat(model, content string, maxTokens int) string {
	b := `{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]`
	if maxTokens > 0 {
		b += `,"max_tokens":` + strconv.Itoa(maxTokens)
	}
	return b + "}"
}

// estimate is what the Transport charges a body by OpenAI's rule, with
// the defaults: a token per 4 characters, and the allowance.
func estimate(body string, allowance int64) int64 {
	return (int64(utf8.RuneCountInString(body))+3)/4 + allowance
}

// TestLearnsEachModelsLimits: each model spends its own buckets, whose
// limits (less the 5% reserve) are learned from the x-ratelimit headers
// of its first answer; tollgate counts what OpenAI's rule charges, never
// less than the upstream counted. The first request of a model goes
// alone, charged to no limit per minute yet, and counts as the upstream
// announces it counted it.
func TestLearnsEachModelsLimits(t *testing.T) {
	h := newHarness(t, oaisim.Config{Models: map[string]oaisim.Limits{
		"gpt-a": {RPM: 100, TPM: 10000}, "gpt-b": {RPM: 40, TPM: 20000},
	}}, nil, openai.Options{})
	bodies := map[string]string{"gpt-a": chat("gpt-a", "hello", 100), "gpt-b": chat("gpt-b", "où est la gare ?", 0)}
	for model, body := range bodies {
		for range 3 {
			resp, _, err := h.post("/v1/chat/completions", body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %v %v", model, resp, err)
			}
		}
	}
	for model, want := range map[string]struct{ estimate, tpm, rpm int64 }{
		"gpt-a": {estimate(bodies["gpt-a"], 100), 9500, 95},
		"gpt-b": {estimate(bodies["gpt-b"], openai.DefaultOutputTokens), 19000, 38},
	} {
		var first int64
		for _, a := range h.sim.Arrivals() {
			if a.Model == model {
				first = a.Tokens
				break
			}
		}
		scope := openai.Scope(key, "", "", model)
		tokens, tpm := h.used(scope, openai.Tokens)
		requests, rpm := h.used(scope, openai.Requests)
		if tokens != first+2*want.estimate || tpm != want.tpm || requests != 3 || rpm != want.rpm {
			t.Errorf("%s: tollgate counts %d of %d tokens and %d of %d requests; want %d+2×%d of %d, 3 of %d",
				model, tokens, tpm, requests, rpm, first, want.estimate, want.tpm, want.rpm)
		}
		if sim, _ := h.simTokens(model); sim > tokens {
			t.Errorf("%s: the upstream counted %d tokens, tollgate %d", model, sim, tokens)
		}
	}
	for _, d := range h.decisions {
		if !strings.HasPrefix(d.Scope, "cred-") || strings.Contains(d.Scope, key) {
			t.Errorf("scope %q: want a hash of the credential", d.Scope)
		}
	}
}

// TestScopes: the organization and project headers, Azure's api-key and
// deployments, and requests without a model each name their scope.
func TestScopes(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	h := newHarness(t, oaisim.Config{}, rdb, openai.Options{})
	body := chat("gpt-4o", "hi", 10)
	cases := []struct {
		path   string
		header []string
		want   string
	}{
		{"/v1/chat/completions", nil, openai.Scope(key, "", "", "gpt-4o")},
		{"/v1/chat/completions", []string{"OpenAI-Organization", "org-acme"}, openai.Scope(key, "org-acme", "", "gpt-4o")},
		{"/v1/chat/completions", []string{"OpenAI-Organization", "org-acme", "OpenAI-Project", "proj_1"}, openai.Scope(key, "org-acme", "proj_1", "gpt-4o")},
		{"/openai/deployments/prod-4o/chat/completions", []string{"Authorization", "", "Api-Key", "azure-key"}, openai.Scope("azure-key", "", "", "prod-4o")},
		{"/v1/images/generations", nil, openai.Scope(key, "", "", "")},
		{"/v1/chat/completions", []string{"Authorization", ""}, "no-key/gpt-4o"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		h.mu.Lock()
		h.decisions = nil
		h.mu.Unlock()
		h.post(tc.path, body, tc.header...)
		h.mu.Lock()
		got := h.decisions
		h.mu.Unlock()
		if len(got) != 1 || got[0].Scope != tc.want {
			t.Errorf("%s %v: decisions %+v, want one in scope %q", tc.path, tc.header, got, tc.want)
			continue
		}
		if seen[tc.want] {
			t.Errorf("scope %q named twice", tc.want)
		}
		seen[tc.want] = true
	}
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("redis keys: %v %v", keys, err)
	}
	for _, k := range keys {
		for _, secret := range []string{key, "azure-key"} {
			if strings.Contains(k, secret) {
				t.Errorf("the redis key %q shows a credential", k)
			}
		}
	}
}

// TestInsufficientQuota: a key without credits gets a *BillingError, no
// retry policy retries it, and nothing is paused: not its own model's
// buckets, not another key's.
func TestInsufficientQuota(t *testing.T) {
	h := newHarness(t, oaisim.Config{Broke: []string{key}}, nil, openai.Options{})
	_, _, err := h.post("/v1/chat/completions", chat("gpt-4o", "hi", 10))
	var be *openai.BillingError
	if !errors.As(err, &be) || !errors.Is(err, openai.ErrInsufficientQuota) || errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Fatalf("got %v; want a *BillingError, not a quota refusal", err)
	}
	if be.Scope != openai.Scope(key, "", "", "gpt-4o") || be.Endpoint != "chat.completions" || !strings.HasPrefix(be.Message, "You exceeded your current quota") {
		t.Errorf("the error tells %+v", be)
	}
	if retry, _ := openai.CheckRetry(func(context.Context, *http.Response, error) (bool, error) { return true, nil })(context.Background(), nil, err); retry {
		t.Error("CheckRetry retries a billing failure")
	}
	// Nothing paused: the next request goes to the upstream again.
	if _, _, err := h.post("/v1/chat/completions", chat("gpt-4o", "hi", 10)); !errors.As(err, &be) {
		t.Errorf("the second request: %v; want the upstream's billing failure again", err)
	}
	if n := len(h.sim.Arrivals()); n != 2 {
		t.Errorf("%d requests reached the upstream, want 2", n)
	}
	// OpenAI's SDKs, which retry errors of their HTTP client, get the 429
	// itself, marked not to be retried, its body whole.
	resp, body, err := h.post("/v1/chat/completions", chat("gpt-4o", "hi", 10), "X-Stainless-Retry-Count", "0")
	if err != nil || resp.StatusCode != 429 || resp.Header.Get("X-Should-Retry") != "false" || !strings.Contains(body, `"insufficient_quota"`) {
		t.Fatalf("from an SDK: %v %v %q; want the 429 insufficient_quota, X-Should-Retry: false", resp, err, body)
	}
	// The same model with a key that has credits is served.
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(chat("gpt-4o", "hi", 10)))
	req.Header.Set("Authorization", "Bearer sk-other")
	resp, err = h.tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("another key: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestRateLimitPausesTheModel: a 429 rate_limit_exceeded (another client
// spent the minute) pauses that model's bucket for every request, and no
// other model's.
func TestRateLimitPausesTheModel(t *testing.T) {
	h := newHarness(t, oaisim.Config{Models: map[string]oaisim.Limits{"tiny": {RPM: 2, TPM: 10000}}}, nil,
		openai.Options{Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
	body := chat("tiny", "hi", 10)
	for range 2 { // a client without tollgate spends the minute
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		h.sim.ServeHTTP(httptest.NewRecorder(), req)
	}
	_, _, err := h.post("/v1/chat/completions", body)
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Bucket != openai.Requests || qe.RetryAfter <= 0 || qe.RetryAfter > time.Minute {
		t.Fatalf("got %v; want a *QuotaError from the upstream on the requests bucket, retry within the minute", err)
	}
	sent := len(h.sim.Arrivals())
	if _, _, err := h.post("/v1/chat/completions", body); !errors.As(err, &qe) {
		t.Fatalf("the model was not paused: %v", err)
	}
	if n := len(h.sim.Arrivals()); n != sent {
		t.Errorf("%d requests reached the upstream while the model was paused", n-sent)
	}
	if resp, _, err := h.post("/v1/chat/completions", chat("other-model", "hi", 10)); err != nil || resp.StatusCode != 200 {
		t.Errorf("another model: %v %v; want it served", resp, err)
	}
}

// TestUnannouncedServer: a server that announces no limits (vLLM) is
// probed by one request, then served at full concurrency; the limits
// given are enforced all the same.
func TestUnannouncedServer(t *testing.T) {
	sim := oaisim.New(oaisim.Config{Silent: true, Latency: 20 * time.Millisecond})
	var mu sync.Mutex
	inFlight, peak, early, answered := 0, 0, 0, false
	base := providertest.Served{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		if !answered {
			early = max(early, inFlight)
		}
		mu.Unlock()
		sim.ServeHTTP(w, r)
		mu.Lock()
		inFlight--
		answered = true
		mu.Unlock()
	})}
	h := newHarness(t, oaisim.Config{}, nil, openai.Options{Base: base})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			resp, _, err := h.post("/v1/chat/completions", chat("llama", "hi", 10))
			if err == nil && resp.StatusCode != 200 {
				err = errors.New(resp.Status)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if early != 1 || peak < 2 {
		t.Errorf("%d requests in flight before the first answer, %d at most; want 1, then more than 1", early, peak)
	}

	// Limits given apply to such a server.
	h = newHarness(t, oaisim.Config{Silent: true}, nil, openai.Options{Limits: openai.Limits{RPM: 3},
		Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
	for i := range 4 {
		_, _, err := h.post("/v1/chat/completions", chat("llama", "hi", 10))
		if (i < 2) != (err == nil) { // 3 less the 5% reserve, rounded up: 2
			t.Errorf("request %d: %v", i, err)
		}
	}
}

// TestSettlesToUsage: with Counting.Usage, a server that counts usage is
// matched exactly: tollgate settles each estimate to the usage the
// response tells, in a body or a stream; a stream that does not tell
// keeps its estimate. (The server announces nothing here, and the limits
// are given, so that the count is settlement's alone.)
func TestSettlesToUsage(t *testing.T) {
	h := newHarness(t, oaisim.Config{CountUsage: true, Silent: true}, nil,
		openai.Options{Counting: openai.Counting{Usage: true}, Limits: openai.Limits{RPM: 100, TPM: 100000}})
	requests := []struct{ path, body string }{
		{"/v1/chat/completions", chat("m-chat", "hello", 50)},
		{"/v1/chat/completions", `{"model":"m-chat-stream","messages":[{"role":"user","content":"hi"}],"max_tokens":40,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/responses", `{"model":"m-responses","input":"hi","max_output_tokens":30}`},
		{"/v1/responses", `{"model":"m-responses-stream","input":"hi","max_output_tokens":30,"stream":true}`},
		{"/v1/embeddings", `{"model":"m-embed","input":["one","two"]}`},
	}
	for _, r := range requests {
		resp, _, err := h.post(r.path, r.body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", r.body, resp, err)
		}
		var model struct{ Model string }
		model.Model = strings.Split(strings.Split(r.body, `"model":"`)[1], `"`)[0]
		sim, _ := h.simTokens(model.Model)
		got, _ := h.used(openai.Scope(key, "", "", model.Model), openai.Tokens)
		if got != sim {
			t.Errorf("%s: tollgate counts %d tokens, the upstream %d", model.Model, got, sim)
		}
	}
	body := `{"model":"m-quiet","messages":[{"role":"user","content":"hi"}],"max_tokens":40,"stream":true}`
	if _, _, err := h.post("/v1/chat/completions", body); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.used(openai.Scope(key, "", "", "m-quiet"), openai.Tokens); got != estimate(body, 40) {
		t.Errorf("a stream that tells no usage: %d tokens, want the estimate %d", got, estimate(body, 40))
	}
}

// closeCounter counts closes of a request body.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestBadRequests: bodies that cannot be counted fail before anything is
// sent, their body closed; odd values are counted by the documented
// defaults; hostile header values and model names do not break anything.
func TestBadRequests(t *testing.T) {
	h := newHarness(t, oaisim.Config{}, nil, openai.Options{MaxBody: 1 << 10})
	for _, body := range []string{`not json`, `[{"model":"gpt-4o"}]`, ``, `{"model":"gpt-4o","messages":[{"content":"` + strings.Repeat("x", 2000) + `"}]}`} {
		cc := &closeCounter{Reader: strings.NewReader(body)}
		req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", nil)
		req.Body = cc
		_, err := h.tr.RoundTrip(req)
		if !errors.Is(err, openai.ErrBody) || cc.closed != 1 {
			t.Errorf("body %.20q: %v, closed %d times; want ErrBody, closed once", body, err, cc.closed)
		}
		if retry, _ := openai.CheckRetry(func(context.Context, *http.Response, error) (bool, error) { return true, nil })(context.Background(), nil, err); retry {
			t.Errorf("body %.20q: CheckRetry retries it", body)
		}
	}
	if n := len(h.sim.Arrivals()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}

	// Learn gpt-4o's limits, then ask for absurd n: a charge no limit
	// holds, refused without sending.
	if _, _, err := h.post("/v1/chat/completions", chat("gpt-4o", "hi", 10)); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[],"max_tokens":100,"n":1e12}`)
	if !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Errorf("absurd n: %v, want an error matching quota.ErrCostExceedsLimit", err)
	}
	if retry, _ := openai.CheckRetry(func(context.Context, *http.Response, error) (bool, error) { return true, nil })(context.Background(), nil, err); retry {
		t.Error("CheckRetry retries a charge no limit holds")
	}
	if n := len(h.sim.Arrivals()); n != 1 {
		t.Errorf("%d requests reached the upstream, want the 1 that taught the limits", n)
	}

	// Hostile values: a 4 KB key with control characters, an organization
	// with braces and a NUL, a model name meant for logs.
	hostile := []string{"Authorization", "Bearer " + strings.Repeat("k\x01{}", 1000), "OpenAI-Organization", "{org}\x00\n", "OpenAI-Project", strings.Repeat("p", 5000)}
	model := "gpt\n{evil}" + strings.Repeat("-", 300)
	resp, _, err := h.post("/v1/chat/completions", `{"model":"`+strings.ReplaceAll(model, "\n", `\n`)+`","messages":[],"max_tokens":5}`, hostile...)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("hostile values: %v %v", resp, err)
	}
	h.mu.Lock()
	last := h.decisions[len(h.decisions)-1]
	h.mu.Unlock()
	if pool, m, _ := strings.Cut(last.Scope, "/"); !strings.HasPrefix(pool, "cred-") || !strings.HasPrefix(m, "model-") || len(last.Scope) > 64 {
		t.Errorf("scope %q: want a credential hash and a model hash", last.Scope)
	}
}

// TestNewTransportRefusesWhatCannotWork: a configuration that cannot work
// fails when it is built, and leaves no Transport behind.
func TestNewTransportRefusesWhatCannotWork(t *testing.T) {
	var nilClient *redis.Client
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		opts openai.Options
	}{
		{"a typed-nil *redis.Client", nilClient, openai.Options{}},
		{"negative limits", nil, openai.Options{Limits: openai.Limits{TPM: -1}}},
		{"a model's negative limits", nil, openai.Options{Models: map[string]openai.Limits{"gpt-4o": {RPD: -5}}}},
		{"a model with no name", nil, openai.Options{Models: map[string]openai.Limits{"": {RPM: 5}}}},
		{"negative counts", nil, openai.Options{Counting: openai.Counting{OutputTokens: -1}}},
		{"a negative minute", nil, openai.Options{Minute: -time.Second}},
		{"a negative MaxBody", nil, openai.Options{MaxBody: -1}},
		{"a reserve of 100%", nil, openai.Options{ReservePercent: 100}},
		{"Base set twice", nil, openai.Options{Tollgate: tollgate.Config{Base: http.DefaultTransport}}},
		{"buckets of its own", nil, openai.Options{Tollgate: tollgate.Config{Buckets: map[string]tollgate.Bucket{}}}},
		{"an upstream reader of its own", nil, openai.Options{Tollgate: tollgate.Config{ReadResponse: tollgate.DefaultUpstream}}},
		{"FailLocal with no Local", nil, openai.Options{Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailLocal}, nil)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := openai.NewTransport(c.rdb, &c.opts)
			if err == nil {
				tr.Close()
				t.Fatal("NewTransport: no error")
			}
			if tr != nil || !strings.HasPrefix(err.Error(), "openai: ") {
				t.Errorf("NewTransport returned %v, %q; want no Transport and an error that names the package", tr, err)
			}
		})
	}
}
