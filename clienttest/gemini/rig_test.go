package gemini_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/providers/gemini"
)

// The load tests' worker processes: the test binary runs itself as them,
// each sending from several goroutines through its own Transport on one
// Redis (or, for the control run, straight) to the simulated API the
// parent serves.

// childEnv carries a worker process's configuration (JSON); its presence
// makes the test binary a worker.
const childEnv = "TOLLGATE_GEMINI_CHILD"

// The models of the load: generateContent (JSON and streamed) spends the
// chat model's limits, batches of embeddings the embedding model's.
const (
	chatModel  = "gemini-2.5-flash"
	embedModel = "gemini-embedding-001"
)

// childConfig is what a worker process is told.
type childConfig struct {
	rig.Config
	Limits  map[string]gemini.Limits
	Retries bool // set HTTPOptions.RetryOptions (the SDK's defaults)
}

// workerResult is what one worker goroutine did.
type workerResult struct {
	Process, Worker int
	Calls           int    // answered
	Streamed        int    // of those, streamed
	Embedded        int    // texts embedded
	Refused         int    // answered 429 by the API
	Attempts        int    // requests the SDK handed the Transport (retries included)
	Turned          int    // of those, refused by tollgate (the SDK retries them with RetryOptions)
	Cut             int    // 1 when tollgate refused its last call, whose turn came after the run's end
	Failed          int    // anything else
	FirstErr        string `json:",omitempty"`
}

func TestMain(m *testing.M) { rig.Main(m, childEnv, child) }

// newClient returns the SDK's client sending through rt to api; retries
// sets HTTPOptions.RetryOptions to the SDK's defaults (5 attempts, 1s
// doubling), nil leaves the SDK's default: no retries.
func newClient(ctx context.Context, rt http.RoundTripper, api, key string, retries bool) (*genai.Client, error) {
	opts := genai.HTTPOptions{BaseURL: api + "/"}
	if retries {
		opts.RetryOptions = &genai.HTTPRetryOptions{}
	}
	return genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPClient: &http.Client{Transport: rt}, HTTPOptions: opts})
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
			tr, err := gemini.NewTransport(rdb, &gemini.Options{Base: base, Minute: cfg.Minute, Models: cfg.Limits,
				Tollgate: rig.Tollgate(cfg.Minute, cfg.Transit)})
			if err != nil {
				return nil, err
			}
			defer tr.Close()
			rt = tr
		}
		counter := &rig.Counter{Base: rt}
		c, err := newClient(context.Background(), counter, cfg.API, cfg.Key, cfg.Retries)
		if err != nil {
			return nil, err
		}

		results := make([]workerResult, cfg.Workers)
		for w := range results {
			results[w].Process, results[w].Worker = cfg.Process, w
		}
		rig.Work(cfg.Start, cfg.Duration, cfg.Workers, cfg.Process, func(ctx context.Context, end time.Time, w int, rng *rand.Rand) bool {
			res := &results[w]
			var streamed bool
			var texts int
			var err error
			if w%3 == 2 {
				texts, err = embed(ctx, c, rng)
			} else {
				streamed, err = converse(ctx, c, rng)
			}
			var apiErr genai.APIError
			switch {
			case err == nil:
				res.Calls++
				res.Embedded += texts
				if streamed {
					res.Streamed++
				}
			case errors.As(err, &apiErr) && apiErr.Code == http.StatusTooManyRequests:
				res.Refused++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
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

// converse asks the chat model, with a system instruction, a prompt of
// varied size, streamed or not, and reads the answer to its end.
func converse(ctx context.Context, c *genai.Client, rng *rand.Rand) (streamed bool, err error) {
	contents := genai.Text(rig.Prompt(rng, 20+rng.IntN(600)))
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("Answer briefly.", genai.RoleUser),
		MaxOutputTokens: int32(16 + rng.IntN(300))}
	if rng.IntN(10) < 4 {
		for _, err := range c.Models.GenerateContentStream(ctx, chatModel, contents, cfg) {
			if err != nil {
				return true, err
			}
		}
		return true, nil
	}
	_, err = c.Models.GenerateContent(ctx, chatModel, contents, cfg)
	return false, err
}

// embed sends one to five chunks of a document, of 40 to 440 bytes, for
// embedding: the SDK sends them as one batchEmbedContents, which counts a
// request per chunk.
func embed(ctx context.Context, c *genai.Client, rng *rand.Rand) (int, error) {
	var contents []*genai.Content
	for range 1 + rng.IntN(5) {
		contents = append(contents, genai.NewContentFromText(rig.Prompt(rng, 40+rng.IntN(400)), genai.RoleUser))
	}
	_, err := c.Models.EmbedContent(ctx, embedModel, contents, nil)
	return len(contents), err
}
