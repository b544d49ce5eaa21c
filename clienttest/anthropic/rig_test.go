package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/providers/anthropic"
)

// The load tests' worker processes: the test binary runs itself as them,
// each sending from several goroutines through its own Transport on one
// Redis (or, for the control run, straight) to the simulated API the
// parent serves.

// childEnv carries a worker process's configuration (JSON); its presence
// makes the test binary a worker.
const childEnv = "TOLLGATE_ANTHROPIC_CHILD"

// The models of the load, each of its own class: Sonnet's binding limit
// is its input tokens per minute, Haiku's its requests per minute.
const (
	sonnet = "claude-sonnet-4-5-20250929"
	haiku  = "claude-haiku-4-5"
)

// childConfig is what a worker process is told: the load's, and for
// the long answers' load (longanswers_test.go) how it refunds.
type childConfig struct {
	rig.Config
	// Long sends the long answers' load: Sonnet alone, larger max_tokens.
	Long bool
	// Conservative refunds the output tokens as any bucket's refund
	// (anthropic.Options.ConservativeRefunds).
	Conservative bool
}

// workerResult is what one worker goroutine did.
type workerResult struct {
	Process, Worker int
	Calls           int    // answered
	Streamed        int    // of those, streamed
	Refused         int    // calls that ended in the API's 429 (after the SDK's retries)
	Overloaded      int    // calls that ended in the API's 529 (after the SDK's retries)
	Attempts        int    // requests the SDK handed the Transport, retries included (worker 0: the process's)
	Turned          int    // of those, refused by tollgate (worker 0: the process's)
	Cut             int    // 1 when tollgate refused its last call, whose turn came after the run's end
	Failed          int    // anything else
	FirstErr        string `json:",omitempty"`
}

func TestMain(m *testing.M) { rig.Main(m, childEnv, child) }

// newClient returns the SDK's client sending through rt to api, with its
// default retries (two).
func newClient(rt http.RoundTripper, api, key string, opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: rt}),
		option.WithBaseURL(api + "/"),
		option.WithAPIKey(key),
	}, opts...)...)
}

// child is a worker process: it sends requests from cfg.Workers
// goroutines until the run ends and prints their results as JSON.
func child(raw string) int {
	return rig.Child(raw, func(cfg childConfig) (any, error) {
		base := rig.Base(cfg.Workers)
		var rt http.RoundTripper = base
		if cfg.Redis != "" {
			rdb := rig.Redis(cfg.Redis, cfg.Workers)
			defer rdb.Close()
			// No limits given: every class's are learned from the headers.
			tr, err := anthropic.NewTransport(rdb, &anthropic.Options{Base: base, Minute: cfg.Minute,
				ConservativeRefunds: cfg.Conservative, Tollgate: rig.Tollgate(cfg.Minute, cfg.Transit)})
			if err != nil {
				return nil, err
			}
			defer tr.Close()
			rt = tr
		}
		counter := &rig.Counter{Base: rt}
		c := newClient(counter, cfg.API, cfg.Key)

		results := make([]workerResult, cfg.Workers)
		for w := range results {
			results[w].Process, results[w].Worker = cfg.Process, w
		}
		rig.Work(cfg.Start, cfg.Duration, cfg.Workers, cfg.Process, func(ctx context.Context, end time.Time, w int, rng *rand.Rand) bool {
			res := &results[w]
			model := sonnet
			if w%3 == 2 && !cfg.Long {
				model = haiku
			}
			ask := converse
			if cfg.Long {
				ask = converseLong
			}
			streamed, err := ask(ctx, c, model, rng)
			var apiErr *sdk.Error
			switch {
			case err == nil:
				res.Calls++
				if streamed {
					res.Streamed++
				}
			case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests:
				res.Refused++
			case errors.As(err, &apiErr) && apiErr.StatusCode == 529:
				res.Overloaded++
			case rig.Cut(ctx, err, end):
				res.Cut++ // its turn comes after the run: this worker is done
				return true
			default:
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
			}
			return false
		})
		if len(results) > 0 {
			results[0].Attempts, results[0].Turned = counter.Counts()
		}
		return results, nil
	})
}

// rules is the long system prompt some of Haiku's requests cache.
var rules = strings.Repeat("Answer briefly, in the language of the question, and never guess. ", 40)

// converse asks model a prompt of varied size and max_tokens, streamed or
// not, a third of Haiku's with the cached system prompt, and reads the
// answer to its end.
func converse(ctx context.Context, c sdk.Client, model string, rng *rand.Rand) (streamed bool, err error) {
	p := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(32 + rng.IntN(300)),
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(rig.Prompt(rng, 100+rng.IntN(1500))))}}
	if model == haiku && rng.IntN(3) == 0 {
		p.System = []sdk.TextBlockParam{{Text: rules, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	} else {
		p.System = []sdk.TextBlockParam{{Text: "Answer briefly."}}
	}
	streamed = rng.IntN(10) < 4
	return streamed, send(ctx, c, p, streamed)
}

// send sends p, streamed or not, and reads the answer to its end: a
// stream must end with its usage.
func send(ctx context.Context, c sdk.Client, p sdk.MessageNewParams, streamed bool) error {
	if streamed {
		s := c.Messages.NewStreaming(ctx, p)
		var m sdk.Message
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				return err
			}
		}
		if err := errors.Join(s.Err(), s.Close()); err != nil {
			return err
		}
		if m.Usage.OutputTokens < 1 {
			return fmt.Errorf("a stream ended without its usage: %+v", m.Usage)
		}
		return nil
	}
	_, err := c.Messages.New(ctx, p)
	return err
}
