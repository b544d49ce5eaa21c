package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/anthsim"
	"github.com/tollgate/tollgate/providers/anthropic"
)

// What the SDK makes of tollgate's refusals: an error of its HTTP client,
// which it retries as a lost connection (twice by default), each attempt
// decided again, then returns wrapped so that errors.As finds the
// *tollgate.QuotaError; option.WithMaxRetries(0) returns it at once. The
// API's own 429 is read by the Transport, which pauses the bucket it
// spent for every worker and returns a *tollgate.QuotaError instead: the
// SDK's retries of it are refused by the pause, and never reach the API.
func TestSDKSeesRefusals(t *testing.T) {
	for _, c := range []struct {
		name     string
		retries  []option.RequestOption
		upstream bool // the refusal is the API's 429, not tollgate's count
		cause    tollgate.Cause
		attempts int64 // what the SDK hands the Transport for the refused call
	}{
		// An RPM of 4, less the 5% reserve: a bucket refilled at 3 a
		// minute, which holds the refill of Transit less (a unit, rounded
		// up: a call admitted now may reach the API up to Transit later),
		// so tollgate lets 2 through at once.
		{"tollgate's count, the SDK's retries", nil, false, tollgate.NoRoom, 3},
		{"tollgate's count, WithMaxRetries(0)", []option.RequestOption{option.WithMaxRetries(0)}, false, tollgate.NoRoom, 1},
		// An RPM of 3, spent by another program, without tollgate.
		{"the API's 429, the SDK's retries", nil, true, tollgate.PausedByUpstream, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			rpm, reserve := int64(4), float64(0)
			if c.upstream {
				rpm, reserve = 3, -1
			}
			sim := anthsim.New(anthsim.Config{Limits: anthsim.Limits{RPM: rpm, ITPM: 100000, OTPM: 100000}})
			api := httptest.NewServer(sim)
			defer api.Close()
			newTransport := func() *anthropic.Transport {
				tr, err := anthropic.NewTransport(nil, &anthropic.Options{ReservePercent: reserve,
					Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tr.Close() })
				return tr
			}
			params := sdk.MessageNewParams{Model: sdk.Model(sonnet), MaxTokens: 20,
				Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Say hello."))}}
			ctx := context.Background()
			counter := &rig.Counter{Base: newTransport()}
			attempts := &counter.Attempts
			client := newClient(counter, api.URL, "sk-ant-errors", c.retries...)
			first, calls := client, 2
			if c.upstream {
				// Another program spends the whole RPM of the same key
				// without tollgate: the first call of client meets the
				// API's 429.
				first, calls = newClient(http.DefaultTransport, api.URL, "sk-ant-errors"), 3
			}
			for i := range calls {
				if _, err := first.Messages.New(ctx, params); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			attempts.Store(0)
			begin := time.Now()
			_, err := client.Messages.New(ctx, params)
			var qe *tollgate.QuotaError
			if !errors.Is(err, tollgate.ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Cause != c.cause || qe.Bucket != anthropic.Requests {
				t.Fatalf("%v (%+v), want a *tollgate.QuotaError of requests, cause %v", err, qe, c.cause)
			}
			if got := attempts.Load(); got != c.attempts {
				t.Errorf("the SDK handed the Transport %d attempts, want %d", got, c.attempts)
			}
			if refused := sim.Stats().Refused[anthsim.Requests]; c.upstream && refused != 1 || !c.upstream && refused != 0 {
				t.Errorf("the API answered 429 %d times: the pause must hold the retries back", refused)
			}
			t.Logf("%d attempts, refused after %v: %v", attempts.Load(), time.Since(begin).Round(time.Millisecond), err)
		})
	}
}
