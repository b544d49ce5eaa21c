package gemini_test

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate"
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
	API      string // the simulated API's base URL
	Redis    string // "" for the control run: no tollgate
	Key      string
	Limits   map[string]gemini.Limits
	Minute   time.Duration
	Transit  time.Duration
	Retries  bool // set HTTPOptions.RetryOptions (the SDK's defaults)
	Start    time.Time
	Duration time.Duration
	Workers  int
	Process  int
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

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(child(cfg))
	}
	os.Exit(m.Run())
}

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
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Workers
	var rt http.RoundTripper = base
	if cfg.Redis != "" {
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Workers})
		defer rdb.Close()
		tr, err := gemini.NewTransport(rdb, &gemini.Options{Base: base, Minute: cfg.Minute, Models: cfg.Limits,
			Tollgate: tollgate.Config{Transit: cfg.Transit,
				// A turn may come a whole minute (and Transit) away.
				Policy: tollgate.Policies(tollgate.Policy{MaxWait: 2 * cfg.Minute}, nil)}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
		defer tr.Close()
		rt = tr
	}
	var attempts, turned atomic.Int64
	rt = counted{rt, &attempts, &turned}
	c, err := newClient(context.Background(), rt, cfg.API, cfg.Key, cfg.Retries)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}

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
				var texts int
				var err error
				if w%3 == 2 {
					texts, err = embed(ctx, c, rng)
				} else {
					streamed, err = converse(ctx, c, rng)
				}
				var qe *tollgate.QuotaError
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
				case ctx.Err() != nil || errors.As(err, &qe) && time.Now().Add(qe.RetryAfter).After(end):
					res.Cut++ // its turn comes after the run: this worker is done
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
	if len(results) > 0 {
		results[0].Attempts, results[0].Turned = int(attempts.Load()), int(turned.Load())
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	return 0
}

// counted counts the requests the SDK hands the Transport, and those
// tollgate refuses.
type counted struct {
	rt               http.RoundTripper
	attempts, turned *atomic.Int64
}

func (c counted) RoundTrip(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	resp, err := c.rt.RoundTrip(req)
	if errors.Is(err, tollgate.ErrQuotaExhausted) {
		c.turned.Add(1)
	}
	return resp, err
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

// converse asks the chat model, with a system instruction, a prompt of
// varied size, streamed or not, and reads the answer to its end.
func converse(ctx context.Context, c *genai.Client, rng *rand.Rand) (streamed bool, err error) {
	contents := genai.Text(prompt(rng, 20+rng.IntN(600)))
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
		contents = append(contents, genai.NewContentFromText(prompt(rng, 40+rng.IntN(400)), genai.RoleUser))
	}
	_, err := c.Models.EmbedContent(ctx, embedModel, contents, nil)
	return len(contents), err
}
