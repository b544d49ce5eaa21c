package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
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
type childConfig struct {
	API      string // the simulated API's base URL
	Redis    string
	Key      string
	Minute   time.Duration
	Transit  time.Duration
	Start    time.Time // every process starts at this instant
	Duration time.Duration
	Workers  int
	Process  int
}

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

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(child(cfg))
	}
	os.Exit(m.Run())
}

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
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Workers})
	defer rdb.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Workers
	tr, err := openai.NewTransport(rdb, &openai.Options{Base: base, Minute: cfg.Minute,
		Tollgate: tollgate.Config{Transit: cfg.Transit,
			// A turn may come a whole minute (and Transit) away: longer than
			// DefaultMaxWait on the real clock.
			Policy: tollgate.Policies(tollgate.Policy{MaxWait: 2 * cfg.Minute}, nil)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	defer tr.Close()
	c := client(tr, cfg.API, cfg.Key)

	time.Sleep(time.Until(cfg.Start))
	end := cfg.Start.Add(cfg.Duration)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	results := make([]workerResult, cfg.Workers)
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() {
			res := &results[w]
			res.Process, res.Worker = cfg.Process, w
			rng := rand.New(rand.NewPCG(uint64(cfg.Process), uint64(w)))
			for i := 0; i < 100000 && ctx.Err() == nil; i++ {
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
					return
				default:
					res.Failed++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				}
			}
		})
	}
	wg.Wait()
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	return 0
}

// words are what prompts are made of: English, French, Japanese, emoji,
// so that characters and bytes differ.
var words = strings.Fields("the quota of every worker is shared by all processes la gare est où ? 駅 東京 ありがとう 🚀 tokens minute limit")

// prompt returns a prompt of about n bytes.
func prompt(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// converse sends a chat completion or a response, of varied prompt and
// allowance, streamed or not, and reads it to its end.
func converse(ctx context.Context, c oai.Client, rng *rand.Rand) (streamed bool, err error) {
	text := prompt(rng, 20+rng.IntN(600))
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
		texts[i] = prompt(rng, 40+rng.IntN(400))
	}
	_, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: embedModel,
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	return err
}
