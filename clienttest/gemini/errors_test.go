package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/gemsim"
	"github.com/tollgate/tollgate/providers/gemini"
)

// What the SDK makes of tollgate's refusals: a transport error, which it
// wraps with %w (so errors.As finds the *tollgate.QuotaError), never a
// genai.APIError; the API's own 429 is read by the Transport, which
// pauses the bucket it names and returns a *tollgate.QuotaError instead.
// With HTTPOptions.RetryOptions the SDK retries transport errors, so it
// retries tollgate's refusals too, each decided again.
func TestSDKSeesRefusals(t *testing.T) {
	const model = chatModel
	for _, c := range []struct {
		name     string
		sim      gemsim.Limits // the API's limits
		told     gemini.Limits // the Transport's
		cause    tollgate.Cause
		bucket   string
		retries  int32 // RetryOptions.Attempts; 0: no RetryOptions
		attempts int64 // what the SDK hands the Transport for the refused call
	}{
		{"tollgate's count", gemsim.Limits{RPM: 100}, gemini.Limits{RPM: 2}, tollgate.NoRoom, gemini.RPM, 0, 1},
		{"tollgate's count, retried", gemsim.Limits{RPM: 100}, gemini.Limits{RPM: 2}, tollgate.NoRoom, gemini.RPM, 3, 3},
		{"the API's QuotaFailure", gemsim.Limits{RPM: 2}, gemini.Limits{RPM: 100}, tollgate.PausedByUpstream, gemini.RPM, 0, 1},
		{"the API's QuotaFailure, retried", gemsim.Limits{RPM: 2}, gemini.Limits{RPM: 100}, tollgate.PausedByUpstream, gemini.RPM, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sim := gemsim.New(gemsim.Config{Models: map[string]gemsim.Limits{model: c.sim}, Minute: time.Minute})
			api := httptest.NewServer(sim)
			defer api.Close()
			tr, err := gemini.NewTransport(nil, &gemini.Options{ReservePercent: -1, Models: map[string]gemini.Limits{model: c.told},
				Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			counter := &rig.Counter{Base: tr}
			attempts := &counter.Attempts
			opts := genai.HTTPOptions{BaseURL: api.URL + "/"}
			if c.retries > 0 {
				opts.RetryOptions = &genai.HTTPRetryOptions{Attempts: genai.Ptr(c.retries), InitialDelay: genai.Ptr(0.01), MaxDelay: genai.Ptr(0.02)}
			}
			client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "AIzaSy-errors", Backend: genai.BackendGeminiAPI,
				HTTPClient: &http.Client{Transport: counter}, HTTPOptions: opts})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 2 {
				if _, err := client.Models.GenerateContent(ctx, model, genai.Text("hello"), nil); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			before := attempts.Load()
			_, err = client.Models.GenerateContent(ctx, model, genai.Text("hello"), nil)
			var qe *tollgate.QuotaError
			var apiErr genai.APIError
			if !errors.As(err, &qe) || !errors.Is(err, tollgate.ErrQuotaExhausted) || errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want a *tollgate.QuotaError and no genai.APIError", err, err)
			}
			if qe.Cause != c.cause || qe.Bucket != c.bucket || qe.RetryAfter <= 0 {
				t.Errorf("QuotaError %+v, want cause %v, bucket %s, a RetryAfter", qe, c.cause, c.bucket)
			}
			if got := attempts.Load() - before; got != c.attempts {
				t.Errorf("the SDK made %d attempts, want %d", got, c.attempts)
			}
			api429 := 0
			for _, a := range sim.Arrivals() {
				if a.Status == 429 {
					api429++
				}
			}
			if want := map[tollgate.Cause]int{tollgate.NoRoom: 0, tollgate.PausedByUpstream: 1}[c.cause]; api429 != want {
				t.Errorf("the API answered 429 %d times, want %d: the pause must hold the retries back", api429, want)
			}
		})
	}
}
