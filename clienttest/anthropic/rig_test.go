package anthropic_test

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

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
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

// childConfig is what a worker process is told.
type childConfig struct {
	API      string // the simulated API's base URL
	Redis    string // "" for the control run: no tollgate
	Key      string
	Minute   time.Duration
	Transit  time.Duration
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
	Refused         int    // calls that ended in the API's 429 (after the SDK's retries)
	Overloaded      int    // calls that ended in the API's 529 (after the SDK's retries)
	Attempts        int    // requests the SDK handed the Transport, retries included (worker 0: the process's)
	Turned          int    // of those, refused by tollgate (worker 0: the process's)
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
		// No limits given: every class's are learned from the headers.
		tr, err := anthropic.NewTransport(rdb, &anthropic.Options{Base: base, Minute: cfg.Minute,
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
	c := newClient(counted{rt, &attempts, &turned}, cfg.API, cfg.Key)

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
				model := sonnet
				if w%3 == 2 {
					model = haiku
				}
				streamed, err := converse(ctx, c, model, rng)
				var qe *tollgate.QuotaError
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

// rules is the long system prompt some of Haiku's requests cache.
var rules = strings.Repeat("Answer briefly, in the language of the question, and never guess. ", 40)

// converse asks model a prompt of varied size and max_tokens, streamed or
// not, a third of Haiku's with the cached system prompt, and reads the
// answer to its end.
func converse(ctx context.Context, c sdk.Client, model string, rng *rand.Rand) (streamed bool, err error) {
	p := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(32 + rng.IntN(300)),
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(prompt(rng, 100+rng.IntN(1500))))}}
	if model == haiku && rng.IntN(3) == 0 {
		p.System = []sdk.TextBlockParam{{Text: rules, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	} else {
		p.System = []sdk.TextBlockParam{{Text: "Answer briefly."}}
	}
	if rng.IntN(10) < 4 {
		s := c.Messages.NewStreaming(ctx, p)
		var m sdk.Message
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				return true, err
			}
		}
		if err := errors.Join(s.Err(), s.Close()); err != nil {
			return true, err
		}
		if m.Usage.OutputTokens < 1 {
			return true, fmt.Errorf("a stream ended without its usage: %+v", m.Usage)
		}
		return true, nil
	}
	_, err = c.Messages.New(ctx, p)
	return false, err
}
