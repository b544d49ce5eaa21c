package anthropic_test

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/anthsim"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// longOTPM is Sonnet's output tokens a minute in the long answers' load,
// its binding limit; the others are well above what the load asks.
const longOTPM = 16000

// TestLongAnswers: answers that take a tenth of the minute each, from
// three processes of six goroutines asking Sonnet, whose binding limit is
// its OTPM: Anthropic charges a request's max_tokens when it arrives and
// gives back what the answer did not use when it ends, so that every
// request holds up to max_tokens of the bucket for a tenth of the minute.
// The same load runs twice: with the output tokens refunded as Anthropic
// refunds them (the default, quota.Limit.AsUpstream), then with the
// conservative refund, which gives back less what the bucket refilled
// while later requests counted on it. Required: no 429 in either run, and
// at least 80% of what the upstream's bucket allows over the whole minutes
// of the run (its capacity, full at the start, and its refill) spent in
// output tokens, when refunded as Anthropic refunds.
func TestLongAnswers(t *testing.T) {
	minute, _, transit := clock(t)
	duration := 5 * minute // the full bucket at the start weighs less
	latency := minute / 10
	boot := 2 * time.Second
	if rig.Race {
		boot = 5 * time.Second
	}
	used := map[bool]float64{}
	for _, conservative := range []bool{false, true} {
		sim := anthsim.New(anthsim.Config{Minute: minute, Latency: latency,
			Classes: map[string]anthsim.Limits{"claude-sonnet-4": {RPM: 4000, ITPM: 400000, OTPM: longOTPM}}})
		api := httptest.NewServer(sim)
		redisAddr := redistest.Start(t).Addr
		start := time.Now().Add(boot) // time for every process to boot
		var cfgs []any
		for p := range procs {
			cfgs = append(cfgs, childConfig{Config: rig.Config{API: api.URL, Redis: redisAddr, Key: "sk-ant-long-key",
				Minute: minute, Transit: transit, Start: start, Duration: duration, Workers: workers, Process: p},
				Long: true, Conservative: conservative})
		}
		var calls, failed int
		for _, rs := range rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...)) {
			for _, r := range rs {
				calls, failed = calls+r.Calls, failed+r.Failed+r.Refused+r.Overloaded
				if r.FirstErr != "" {
					t.Logf("conservative %v, process %d worker %d: %s", conservative, r.Process, r.Worker, r.FirstErr)
				}
			}
		}
		api.Close()
		st := sim.Stats()
		n429 := 0
		for _, n := range st.Refused {
			n429 += n
		}
		var out []windowcheck.Call
		for _, a := range sim.Arrivals() {
			if a.Status == 200 {
				out = append(out, windowcheck.Call{At: a.At, Units: a.Output})
			}
		}
		if len(out) < 2 || out[len(out)-1].At.Sub(out[0].At) < minute {
			t.Fatalf("conservative %v: %d answers, in less than a minute", conservative, len(out))
		}
		// The share used: the output tokens of the whole minutes from the
		// first answer, over what the upstream's bucket allows in them:
		// the full bucket the run starts with, and their refill.
		perMinute, whole := rig.PerMinute(out, minute)
		minutes := int64(len(perMinute) - 1)
		used[conservative] = float64(whole) / float64((1+minutes)*longOTPM)
		t.Logf("refunds conservative %v: %d calls answered, %d failed; output tokens per whole minute %v of %d: %.1f%% of the full bucket and its refill used; bucket drawn %d deep at most; the API answered 429 %d times",
			conservative, calls, failed, perMinute[:minutes], longOTPM, 100*used[conservative], st.MaxUse["claude-sonnet-4"][anthsim.OutputTokens], n429)
		if n429 > 0 || failed > 0 {
			t.Errorf("conservative %v: the API answered 429 %d times (%v); %d calls failed", conservative, n429, st.Refused, failed)
		}
	}
	if used[false] < 0.8 {
		t.Errorf("refunded as Anthropic refunds: %.1f%% of the OTPM used, want at least 80%% (the conservative refund: %.1f%%)", 100*used[false], 100*used[true])
	}
}

// converseLong asks model for an answer of up to 100 to 900 tokens,
// streamed or not, with a short prompt, and reads it to its end.
func converseLong(ctx context.Context, c sdk.Client, model string, rng *rand.Rand) (streamed bool, err error) {
	p := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(100 + rng.IntN(800)),
		System:   []sdk.TextBlockParam{{Text: "Answer at length."}},
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(rig.Prompt(rng, 100+rng.IntN(400))))}}
	streamed = rng.IntN(10) < 4
	return streamed, send(ctx, c, p, streamed)
}
