package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/gemsim"
	"github.com/tollgate/tollgate/internal/providertest"
	"github.com/tollgate/tollgate/providers/gemini"
)

const key = "AIzaSy-test-0123456789abcdef"

// harness is a Transport in front of a simulated API, served in memory.
type harness struct {
	t    *testing.T
	sim  *gemsim.Server
	tr   *gemini.Transport
	sent atomic.Int64
}

func newHarness(t *testing.T, sim gemsim.Config, opts gemini.Options) *harness {
	t.Helper()
	h := &harness{t: t, sim: gemsim.New(sim)}
	if opts.Base == nil {
		opts.Base = providertest.Served{Handler: h.sim, Sent: &h.sent}
	}
	tr, err := gemini.NewTransport(nil, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	h.tr = tr
	return h
}

// post sends body to a model's method, with the key in X-Goog-Api-Key,
// and reads the answer whole.
func (h *harness) post(model, method, body string) (*http.Response, string, error) {
	h.t.Helper()
	u := "https://generativelanguage.googleapis.com/v1beta/models/" + model + ":" + method
	if method == "streamGenerateContent" {
		u += "?alt=sse"
	}
	req, err := http.NewRequest("POST", u, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Goog-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	return providertest.Send(h.tr, req)
}

// used returns what a bucket of a model's scope counts now.
func (h *harness) used(model, bucket string) int64 {
	h.t.Helper()
	us, err := h.tr.Usage(context.Background(), gemini.Scope(key, model), bucket)
	if err != nil || len(us) != 1 {
		h.t.Fatalf("Usage(%s, %s) = %v, %v", model, bucket, us, err)
	}
	return us[0].Used
}

// limitOf returns the units a bucket of a model's scope admits.
func (h *harness) limitOf(model, bucket string) int64 {
	h.t.Helper()
	us, err := h.tr.Usage(context.Background(), gemini.Scope(key, model), bucket)
	if err != nil || len(us) != 1 {
		h.t.Fatalf("Usage(%s, %s) = %v, %v", model, bucket, us, err)
	}
	return us[0].Limit.Units
}

func text(s string) string {
	return fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%q}]}]}`, s)
}

func TestModelWithoutLimitsIsRefused(t *testing.T) {
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{"gemini-9-ultra": {RPM: 10}}}, gemini.Options{})
	_, _, err := h.post("gemini-9-ultra", "generateContent", text("hello"))
	if !errors.Is(err, gemini.ErrNoLimits) || !strings.Contains(err.Error(), `"gemini-9-ultra"`) {
		t.Fatalf("err = %v, want ErrNoLimits naming the model", err)
	}
	if errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("a model without limits is a configuration error, not a spent quota: %v", err)
	}
	if n := h.sent.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

func TestLimitsPrecedence(t *testing.T) {
	sim := gemsim.Config{Models: map[string]gemsim.Limits{}}
	// FreeTier's, when nothing is given (less the 5% reserve, rounded up).
	h := newHarness(t, sim, gemini.Options{})
	if got, want := h.limitOf("gemini-2.5-flash", gemini.RPD), gemini.FreeTier()["gemini-2.5-flash"].RPD; got != want-(want*5+99)/100 {
		t.Errorf("free tier RPD limit = %d, want %d less 5%%", got, want)
	}
	// Options.Limits replaces FreeTier, Options.Models replaces both.
	h = newHarness(t, sim, gemini.Options{ReservePercent: -1, Limits: gemini.Limits{RPM: 100, TPM: 1000, RPD: 5000},
		Models: map[string]gemini.Limits{"gemini-2.5-pro": {RPM: 7, TPM: 700}}})
	for _, c := range []struct {
		model, bucket string
		want          int64
	}{
		{"gemini-2.5-flash", gemini.RPM, 100},
		{"gemini-2.5-flash", gemini.RPD, 5000},
		{"a-model-of-my-own", gemini.TPM, 1000},
		{"gemini-2.5-pro", gemini.RPM, 7},
		{"gemini-2.5-pro", gemini.TPM, 700},
	} {
		if got := h.limitOf(c.model, c.bucket); got != c.want {
			t.Errorf("%s %s: limit %d, want %d", c.model, c.bucket, got, c.want)
		}
	}
	// A limit of 0 is not enforced.
	if got := h.limitOf("gemini-2.5-pro", gemini.RPD); got < 1<<40 {
		t.Errorf("gemini-2.5-pro RPD: limit %d, want none (the most units)", got)
	}
}

func TestChargesSettleToPromptTokens(t *testing.T) {
	const model = "gemini-2.5-flash"
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: {RPM: 100, TPM: 100000, RPD: 1000}}},
		gemini.Options{Models: map[string]gemini.Limits{model: {RPM: 100, TPM: 100000, RPD: 1000}}})
	prompt := strings.Repeat("tokens are counted ", 40) + "東京駅"
	for _, method := range []string{"generateContent", "streamGenerateContent"} {
		before := h.used(model, gemini.TPM)
		resp, body, err := h.post(model, method, text(prompt))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v %s", method, resp, err, body)
		}
		as := h.sim.Arrivals()
		truth := as[len(as)-1].Tokens
		if got := h.used(model, gemini.TPM) - before; got != truth {
			t.Errorf("%s: TPM counts %d after the answer, want its promptTokenCount %d", method, got, truth)
		}
	}
	if got := h.used(model, gemini.RPM); got != 2 {
		t.Errorf("RPM counts %d, want 2", got)
	}
}

func TestBatchOfEmbeddingsCountsEachRequest(t *testing.T) {
	const model = "gemini-embedding-001"
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: {RPM: 100, TPM: 100000, RPD: 1000}}}, gemini.Options{})
	body := `{"requests":[` + strings.Repeat(`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a text to embed"}]}},`, 2) +
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"the last"}]}}]}`
	resp, out, err := h.post(model, "batchEmbedContents", body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v %s", resp, err, out)
	}
	as := h.sim.Arrivals()
	for _, b := range []string{gemini.RPM, gemini.RPD} {
		if got := h.used(model, b); got != 3 || as[0].Requests != 3 {
			t.Errorf("%s counts %d (the API %d), want 3", b, got, as[0].Requests)
		}
	}
	if est := h.used(model, gemini.TPM); est < as[0].Tokens {
		t.Errorf("TPM counts %d, under the API's %d", est, as[0].Tokens)
	}
}

func TestCountTokensIsFreeAndCountsParts(t *testing.T) {
	const model = "gemini-2.5-flash"
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: {RPM: 100, TPM: 100000, RPD: 1000}}, FileTokens: 4321}, gemini.Options{})
	resp, _, err := h.post(model, "countTokens", text("how many?"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	if got := h.used(model, gemini.RPM); got != 0 {
		t.Errorf("countTokens spent %d requests", got)
	}
	// A part by URI: the Transport asks countTokens first, and charges what it says.
	body := `{"contents":[{"parts":[{"text":"describe"},{"fileData":{"mimeType":"video/mp4","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}]}]}`
	if resp, out, err := h.post(model, "generateContent", body); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err, out)
	}
	as := h.sim.Arrivals()
	if len(as) != 1 || as[0].Tokens < 4321 {
		t.Fatalf("arrivals %+v, want one of at least 4321 tokens", as)
	}
	if got := h.used(model, gemini.TPM); got != as[0].Tokens {
		t.Errorf("TPM counts %d, want %d", got, as[0].Tokens)
	}
}

func TestCountTokensFailureRefuses(t *testing.T) {
	const model = "gemini-2.5-flash"
	fails := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":500,"status":"INTERNAL"}}`, 500)
	})
	var sent atomic.Int64
	tr, err := gemini.NewTransport(nil, &gemini.Options{Base: providertest.Served{Handler: fails, Sent: &sent}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	body := `{"contents":[{"parts":[{"fileData":{"fileUri":"gs://b/o"}}]}]}`
	req, _ := http.NewRequest("POST", "https://generativelanguage.googleapis.com/v1beta/models/"+model+":generateContent?key="+key, strings.NewReader(body))
	_, err = tr.RoundTrip(req)
	if !errors.Is(err, gemini.ErrCountTokens) {
		t.Fatalf("err = %v, want ErrCountTokens", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("the error shows the key: %v", err)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d requests sent, want only the countTokens one", n)
	}
}

func TestRefusalPausesTheBucketNamed(t *testing.T) {
	const model, other = "gemini-2.5-flash", "gemini-2.5-pro"
	cases := []struct {
		name   string
		sim    gemsim.Limits
		bucket string
		calls  int
	}{
		{"RPM", gemsim.Limits{RPM: 2}, gemini.RPM, 2},
		{"TPM", gemsim.Limits{TPM: 30}, gemini.TPM, 1},
		{"RPD", gemsim.Limits{RPD: 3}, gemini.RPD, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The Transport believes in limits far above the API's.
			big := gemini.Limits{RPM: 1000, TPM: 1000000, RPD: 100000}
			h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: c.sim, other: {RPM: 100}}, Minute: time.Second},
				gemini.Options{Limits: big, Minute: time.Second,
					Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
			prompt := text(strings.Repeat("a", 100)) // 25 tokens
			for i := range c.calls {
				if resp, out, err := h.post(model, "generateContent", prompt); err != nil || resp.StatusCode != 200 {
					t.Fatalf("call %d: %v %v %s", i, resp, err, out)
				}
			}
			// The API's 429 comes back as the upstream's pause, and the
			// next request is refused without being sent.
			for i, sends := range []bool{true, false} {
				sent := h.sent.Load()
				_, _, err := h.post(model, "generateContent", prompt)
				var qe *tollgate.QuotaError
				if !errors.As(err, &qe) || !errors.Is(err, tollgate.ErrQuotaExhausted) || qe.Cause != tollgate.PausedByUpstream || qe.Bucket != c.bucket {
					t.Fatalf("call %d after the limit: %v (%+v), want a pause of %s", i, err, qe, c.bucket)
				}
				if qe.RetryAfter <= 0 || qe.RetryAfter > 1441*time.Second {
					t.Errorf("RetryAfter = %v, want the retryDelay", qe.RetryAfter)
				}
				if got := h.sent.Load() > sent; got != sends {
					t.Errorf("call %d after the limit: sent %v, want %v", i, got, sends)
				}
			}
			as := h.sim.Arrivals()
			if last := as[len(as)-1]; last.Status != 429 || !strings.HasPrefix(last.Limit, map[string]string{gemini.RPM: gemsim.QuotaRPM, gemini.TPM: gemsim.QuotaTPM, gemini.RPD: gemsim.QuotaRPD}[c.bucket]) {
				t.Errorf("the API's last answer: %+v", last)
			}
			// Only that bucket of that model: another model is not paused.
			if resp, out, err := h.post(other, "generateContent", prompt); err != nil || resp.StatusCode != 200 {
				t.Errorf("another model: %v %v %s", resp, err, out)
			}
		})
	}
}

func TestKeyNeverInScope(t *testing.T) {
	if s := gemini.Scope(key, "gemini-2.5-flash"); strings.Contains(s, key) || !strings.HasSuffix(s, "/gemini-2.5-flash") {
		t.Errorf("Scope = %q", s)
	}
	if gemini.Scope(key, "m") == gemini.Scope(key+"x", "m") {
		t.Error("two keys share a scope")
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []gemini.Options{
		{Minute: -1},
		{MaxBody: -1},
		{ReservePercent: 100},
		{Limits: gemini.Limits{RPM: -1}},
		{Models: map[string]gemini.Limits{"m": {}}},
		{Models: map[string]gemini.Limits{"": {RPM: 1}}},
		{Tollgate: tollgate.Config{Base: http.DefaultTransport}},
		{Counting: gemini.Counting{AudioBytesPerSecond: -1}},
	} {
		if tr, err := gemini.NewTransport(nil, &o); err == nil || !strings.HasPrefix(err.Error(), "gemini: ") {
			t.Errorf("%+v: err = %v", o, err)
			if tr != nil {
				tr.Close()
			}
		}
	}
}

func TestBodyNotJSONIsRefused(t *testing.T) {
	h := newHarness(t, gemsim.Config{}, gemini.Options{})
	if _, _, err := h.post("gemini-2.5-flash", "generateContent", "not json"); !errors.Is(err, gemini.ErrBody) {
		t.Errorf("err = %v, want ErrBody", err)
	}
	if h.sent.Load() != 0 {
		t.Error("sent")
	}
}

func TestKeyInQueryOrHeaderIsOneProject(t *testing.T) {
	const model = "gemini-2.5-flash"
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: {}}}, gemini.Options{})
	if resp, _, err := h.post(model, "generateContent", text("by header")); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	req, _ := http.NewRequest("POST", "https://generativelanguage.googleapis.com/v1beta/models/"+model+":generateContent?key="+key, strings.NewReader(text("by query")))
	resp, err := h.tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	resp.Body.Close()
	if got := h.used(model, gemini.RPM); got != 2 {
		t.Errorf("the key's project counts %d requests, want both", got)
	}
}

func TestNamedProject(t *testing.T) {
	const model = "gemini-2.5-flash"
	h := newHarness(t, gemsim.Config{Models: map[string]gemsim.Limits{model: {}}},
		gemini.Options{Tollgate: tollgate.Config{Scope: tollgate.Scope("my-project")}})
	if resp, _, err := h.post(model, "generateContent", text("hello")); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	us, err := h.tr.Usage(context.Background(), "my-project/"+model, gemini.RPM)
	if err != nil || len(us) != 1 || us[0].Used != 1 {
		t.Errorf("my-project/%s: %v %v, want 1 request", model, us, err)
	}
}
