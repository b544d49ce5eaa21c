package github_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	gogithub "github.com/google/go-github/v75/github"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/github"
)

// The load tests run the test binary as worker processes: TestMain hands
// a process started with workerEnv set to runWorker.
const workerEnv = "TOLLGATE_GITHUB_WORKER"

// workerConfig is what a worker process is told (JSON in workerEnv).
type workerConfig struct {
	Redis   string // the Redis every process shares
	API     string // the simulated API's URL
	Token   string
	Workers int       // goroutines
	Start   time.Time // when they begin, in every process at once
	Until   time.Time // when they stop starting operations
	Minute  time.Duration
	Hour    time.Duration
	Mix     mix
	Seed    uint64
}

// mix weighs the operations a goroutine picks from.
type mix struct {
	Get    int // a repository
	List   int // a repository's issues, up to three pages of 100
	Search int // issues
	Code   int // code search
	Create int // an issue
	Query  int // a small GraphQL query that asks for its cost
	Heavy  int // GraphQL's documented example, 51 points, without asking
	User   int // a user
}

// operation is one go-github call, or a few for a paginated list; it
// returns what it did (e.g. "list:3") and its error.
type operation func(ctx context.Context, c *gogithub.Client) (string, error)

// operations returns the mix's operations, each as often as its weight.
func (m mix) operations() []operation {
	var out []operation
	add := func(n int, op operation) {
		for range n {
			out = append(out, op)
		}
	}
	add(m.Get, func(ctx context.Context, c *gogithub.Client) (string, error) {
		_, _, err := c.Repositories.Get(ctx, "tollgate", "tollgate")
		return "get", err
	})
	add(m.List, func(ctx context.Context, c *gogithub.Client) (string, error) {
		opts := &gogithub.IssueListByRepoOptions{ListOptions: gogithub.ListOptions{PerPage: 100}}
		for pages := 1; ; pages++ {
			_, resp, err := c.Issues.ListByRepo(ctx, "tollgate", "tollgate", opts)
			if err != nil || resp.NextPage == 0 || pages == 3 {
				return fmt.Sprintf("list:%d", pages), err
			}
			opts.ListOptions.Page = resp.NextPage
		}
	})
	add(m.Search, func(ctx context.Context, c *gogithub.Client) (string, error) {
		_, _, err := c.Search.Issues(ctx, "repo:tollgate/tollgate is:open quota", nil)
		return "search", err
	})
	add(m.Code, func(ctx context.Context, c *gogithub.Client) (string, error) {
		_, _, err := c.Search.Code(ctx, "RoundTrip repo:tollgate/tollgate", nil)
		return "code", err
	})
	add(m.Create, func(ctx context.Context, c *gogithub.Client) (string, error) {
		_, _, err := c.Issues.Create(ctx, "tollgate", "tollgate", &gogithub.IssueRequest{Title: gogithub.Ptr("from the load test")})
		return "create", err
	})
	add(m.Query, func(ctx context.Context, c *gogithub.Client) (string, error) {
		return "query", graphQL(ctx, c, `{ viewer { login repositories(first: 10) { nodes { issues(first: 10) { nodes { title } } } } } rateLimit { cost remaining } }`)
	})
	add(m.Heavy, func(ctx context.Context, c *gogithub.Client) (string, error) {
		return "heavy", graphQL(ctx, c, heavyQuery)
	})
	add(m.User, func(ctx context.Context, c *gogithub.Client) (string, error) {
		_, _, err := c.Users.Get(ctx, "octocat")
		return "user", err
	})
	return out
}

// heavyQuery is the example of GitHub's page on GraphQL rate limits: 5,101
// requests, 51 points.
const heavyQuery = `query { viewer { login repositories(first: 100) { edges { node { id
  issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } } }`

// graphQL sends a query with go-github's raw request API.
func graphQL(ctx context.Context, c *gogithub.Client, query string) error {
	req, err := c.NewRequest("POST", "graphql", map[string]string{"query": query})
	if err != nil {
		return err
	}
	var out struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if _, err := c.Do(ctx, req, &out); err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		return fmt.Errorf("graphql: %s", out.Errors[0].Message)
	}
	return nil
}

// workerReport is what a worker process reports (JSON on stdout).
type workerReport struct {
	Calls    map[string]int // operations that succeeded, by what they did
	Refused  int            // tollgate refused, counting its own limits, within the deadline
	Upstream int            // tollgate refused, GitHub having said no
	Limited  int            // go-github's rate-limit errors: GitHub said no to a request sent
	Cut      int            // operations the end of the run cut short, or refused as waits past it
	Failed   int            // anything else
	First    string         // the first of those
}

// runWorker is a worker process: its goroutines run operations of the mix
// through one Transport until the configured instant, and it prints its
// report.
func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Workers + 8})
	defer rdb.Close()
	tr, err := github.NewTransport(rdb, &github.Options{Minute: cfg.Minute, Hour: cfg.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	defer tr.Close()
	client := gogithub.NewClient(&http.Client{Transport: tr}).WithAuthToken(cfg.Token)
	if client.BaseURL, err = url.Parse(cfg.API + "/"); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	// Operations under way when the run ends may finish: waits beyond
	// this deadline fail at once.
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Until.Add(3*time.Second))
	defer cancel()

	ops := cfg.Mix.operations()
	time.Sleep(time.Until(cfg.Start))
	var mu sync.Mutex
	rep := workerReport{Calls: map[string]int{}}
	var wg sync.WaitGroup
	for g := range cfg.Workers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(g)))
		wg.Go(func() {
			for time.Now().Before(cfg.Until) {
				did, err := ops[rng.IntN(len(ops))](ctx, client)
				mu.Lock()
				rep.count(did, err, ctx)
				mu.Unlock()
				// A wait past the deadline fails at once: rather than
				// spin, sleep until the units fit or the run ends.
				var qe *tollgate.QuotaError
				if errors.As(err, &qe) {
					time.Sleep(min(qe.RetryAfter, time.Until(cfg.Until)))
				}
			}
		})
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// count adds an operation's outcome to the report.
func (r *workerReport) count(did string, err error, ctx context.Context) {
	var qe *tollgate.QuotaError
	var rle *gogithub.RateLimitError
	var abuse *gogithub.AbuseRateLimitError
	var er *gogithub.ErrorResponse
	switch {
	case err == nil:
		r.Calls[did]++
	case errors.As(err, &qe) && qe.Cause == tollgate.PausedByUpstream:
		r.Upstream++
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &qe) && qe.Cause != tollgate.PausedByUpstream && qe.RetryAfter > 0 && beyond(ctx, qe.RetryAfter):
		r.Cut++
	case errors.As(err, &qe):
		r.Refused++
	case errors.As(err, &rle), errors.As(err, &abuse),
		errors.As(err, &er) && (er.Response.StatusCode == http.StatusForbidden || er.Response.StatusCode == http.StatusTooManyRequests):
		r.Limited++
	default:
		r.Failed++
		if r.First == "" {
			r.First = did + ": " + err.Error()
		}
	}
}

// beyond reports whether waiting d from now would pass ctx's deadline: a
// refusal that only the end of the run caused.
func beyond(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Now().Add(d).After(deadline)
}
