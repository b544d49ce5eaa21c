package openai_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/providers/openai"
)

// The load test's worker processes: the test binary runs itself as them,
// each sending from several goroutines through its own Transport on one
// Redis to the simulated API the parent serves.

// childEnv carries a worker process's configuration (JSON); its presence
// makes the test binary a worker.
const childEnv = "TOLLGATE_OPENAI_CHILD"

// The models of the load: chat completions and responses share the chat
// model's limits, as on OpenAI, where limits are per model; embeddings
// spend their own.
const (
	chatModel  = "gpt-4o-mini"
	embedModel = "text-embedding-3-small"
)

// childConfig is what a worker process is told.
type childConfig = rig.Config

// workerResult is what one worker goroutine did.
type workerResult struct {
	Process, Worker int
	Calls           int           // answered
	Streamed        int           // of those, streamed
	Cut             int           // 1 when tollgate refused its last call, whose turn came after the run's end
	CutAt           time.Time     `json:",omitzero"` // when
	CutWait         time.Duration `json:",omitzero"` // and how far its turn was
	Failed          int           // anything else
	FirstErr        string        `json:",omitempty"`
}

func TestMain(m *testing.M) { rig.Main(m, childEnv, child) }

// client returns OpenAI's client sending through tr to api, with its own
// retries off: tollgate waits for the turns, and a retry would be one
// more request charged.
func client(tr http.RoundTripper, api, key string) oai.Client {
	return oai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithBaseURL(api+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	)
}

// child is a worker process: it sends requests from cfg.Workers
// goroutines until the run ends and prints their results as JSON.
func child(raw string) int {
	return rig.Child(raw, func(cfg childConfig) (any, error) {
		rdb := rig.Redis(cfg.Redis, cfg.Workers)
		defer rdb.Close()
		tr, err := openai.NewTransport(rdb, &openai.Options{Base: rig.Base(cfg.Workers), Minute: cfg.Minute,
			Tollgate: rig.Tollgate(cfg.Minute, cfg.Transit)})
		if err != nil {
			return nil, err
		}
		defer tr.Close()
		c := client(tr, cfg.API, cfg.Key)

		results := make([]workerResult, cfg.Workers)
		for w := range results {
			results[w].Process, results[w].Worker = cfg.Process, w
		}
		rig.Work(cfg.Start, cfg.Duration, cfg.Workers, cfg.Process, func(ctx context.Context, end time.Time, w int, rng *rand.Rand) bool {
			res := &results[w]
			var streamed bool
			var err error
			if w%4 == 3 {
				err = embed(ctx, c, rng)
			} else {
				streamed, err = converse(ctx, c, rng)
			}
			var qe *tollgate.QuotaError
			switch {
			case err == nil:
				res.Calls++
				if streamed {
					res.Streamed++
				}
			case ctx.Err() != nil || errors.As(err, &qe) && qe.Cause != tollgate.PausedByUpstream && time.Now().Add(qe.RetryAfter).After(end):
				res.Cut++ // its turn comes after the run: this worker is done
				res.CutAt = time.Now()
				if qe != nil {
					res.CutWait = qe.RetryAfter
				}
				return true
			default:
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
			}
			return false
		})
		return results, nil
	})
}

// converse sends a chat completion or a response, of varied prompt and
// allowance, streamed or not, and reads it to its end.
func converse(ctx context.Context, c oai.Client, rng *rand.Rand) (streamed bool, err error) {
	text := rig.Prompt(rng, 20+rng.IntN(600))
	allowance := int64(16 + rng.IntN(300))
	streamed = rng.IntN(10) < 4
	if rng.IntN(10) == 0 {
		p := responses.ResponseNewParams{Model: chatModel, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(text)},
			MaxOutputTokens: oai.Int(allowance)}
		if !streamed {
			_, err := c.Responses.New(ctx, p)
			return false, err
		}
		s := c.Responses.NewStreaming(ctx, p)
		for s.Next() {
		}
		return true, errors.Join(s.Err(), s.Close())
	}
	p := oai.ChatCompletionNewParams{Model: chatModel, Messages: []oai.ChatCompletionMessageParamUnion{
		oai.SystemMessage("Answer briefly."), oai.UserMessage(text)}}
	switch r := rng.IntN(20); {
	case r == 0: // no allowance: the default is charged
	case r < 6:
		p.MaxCompletionTokens = oai.Int(allowance)
	default:
		p.MaxTokens = oai.Int(allowance)
	}
	if rng.IntN(10) == 0 {
		p.N = oai.Int(2)
	}
	if !streamed {
		_, err := c.Chat.Completions.New(ctx, p)
		return false, err
	}
	if rng.IntN(2) == 0 {
		p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	}
	s := c.Chat.Completions.NewStreaming(ctx, p)
	for s.Next() {
	}
	return true, errors.Join(s.Err(), s.Close())
}

// embed sends one to six chunks of a document, of 40 to 440 bytes, for
// embedding.
func embed(ctx context.Context, c oai.Client, rng *rand.Rand) error {
	texts := make([]string, 1+rng.IntN(6))
	for i := range texts {
		texts[i] = rig.Prompt(rng, 40+rng.IntN(400))
	}
	_, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: embedModel,
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	return err
}
