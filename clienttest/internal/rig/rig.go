// Package rig is the multi-process load rig the clienttest packages
// share. A load test starts worker processes by running its own test
// binary again (Start) with a configuration in an environment variable;
// TestMain hands that configuration to the package's worker (Main), which
// decodes it and prints a JSON report (Child), usually after sending from
// several goroutines at once (Work); the test then collects the reports
// (Wait). The rest are the parts every worker builds alike: its base
// Transport, its Redis client and tollgate's Config, a RoundTripper that
// counts the SDK's attempts, prompts of mixed scripts, and the per-minute
// use of a limit.
package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// Main runs the package's tests, or, in a worker process (env set), runs
// worker with env's value instead; either way it exits with their code.
// Call it from TestMain.
func Main(m *testing.M, env string, worker func(raw string) int) {
	if raw := os.Getenv(env); raw != "" {
		os.Exit(worker(raw))
	}
	os.Exit(m.Run())
}

// Config is what every worker process is told; a package's worker
// configuration embeds it, and adds its own.
type Config struct {
	API      string // the simulated API's base URL
	Redis    string // "" for a control run: no tollgate
	Key      string
	Minute   time.Duration
	Transit  time.Duration
	Start    time.Time // every process starts at this instant
	Duration time.Duration
	Workers  int
	Process  int
}

// Procs are worker processes started by Start.
type Procs struct {
	cmds []*exec.Cmd
	outs []*bytes.Buffer
}

// Start starts one worker process per configuration: the test binary,
// running no test, with env set to the configuration as JSON. Their
// standard output is kept for Wait, their standard error is the test's.
func Start(t testing.TB, env string, cfgs ...any) *Procs {
	t.Helper()
	p := &Procs{}
	for _, cfg := range cfgs {
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env+"="+string(raw))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.cmds, p.outs = append(p.cmds, cmd), append(p.outs, &out)
	}
	return p
}

// Wait waits for every process of p and returns their reports, in the
// order they were started, each decoded from the JSON it printed. A
// process that fails, or prints something else, ends the test.
func Wait[R any](t testing.TB, p *Procs) []R {
	t.Helper()
	reports := make([]R, len(p.cmds))
	for i, cmd := range p.cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker process %d: %v", i, err)
		}
		if err := json.Unmarshal(p.outs[i].Bytes(), &reports[i]); err != nil {
			t.Fatalf("worker process %d printed %q: %v", i, p.outs[i].String(), err)
		}
	}
	return reports
}

// Child is a worker process's body: it decodes raw into a C, runs run
// with it, and prints what run returns as JSON. It returns the process's
// exit code: 0, or 3 when any step fails (said on standard error).
func Child[C any](raw string, run func(cfg C) (report any, err error)) int {
	var cfg C
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	report, err := run(cfg)
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(report)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	return 0
}

// Work sleeps until start, then calls step over and over on each of
// workers goroutines until start+duration, until step reports it done, or
// 100000 times, and returns when every goroutine has. step is given a
// context that ends at start+duration, that instant, its goroutine's
// number w, and a generator of its own, seeded with process and w.
func Work(start time.Time, duration time.Duration, workers, process int,
	step func(ctx context.Context, end time.Time, w int, rng *rand.Rand) (done bool)) {
	time.Sleep(time.Until(start))
	end := start.Add(duration)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(process), uint64(w)))
			for i := 0; i < 100000 && ctx.Err() == nil; i++ {
				if step(ctx, end, w, rng) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// Cut reports whether err ended a worker's run: ctx is done, or tollgate
// refused the call with a turn after end.
func Cut(ctx context.Context, err error, end time.Time) bool {
	var qe *tollgate.QuotaError
	return ctx.Err() != nil || errors.As(err, &qe) && time.Now().Add(qe.RetryAfter).After(end)
}

// Base returns a clone of http.DefaultTransport that keeps an idle
// connection for each of workers goroutines.
func Base(workers int) *http.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = workers
	return base
}

// Redis returns a client of the redis-server at addr with a connection
// for each of workers goroutines.
func Redis(addr string, workers int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: workers})
}

// Tollgate returns the workers' tollgate.Config on a clock whose minute
// lasts minute: Transit, and a MaxWait of two minutes, since a turn may
// come a whole minute (and Transit) away, longer than DefaultMaxWait on
// the real clock.
func Tollgate(minute, transit time.Duration) tollgate.Config {
	return tollgate.Config{Transit: transit,
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: 2 * minute}, nil)}
}

// Counter is a RoundTripper that counts the requests handed to it (an
// SDK's attempts, retries included) and those tollgate refuses.
type Counter struct {
	// Base sends the requests.
	Base http.RoundTripper
	// Attempts counts the requests handed to RoundTrip, Turned those of
	// them tollgate refused.
	Attempts, Turned atomic.Int64
}

// RoundTrip counts req and sends it through c.Base.
func (c *Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.Attempts.Add(1)
	resp, err := c.Base.RoundTrip(req)
	if errors.Is(err, tollgate.ErrQuotaExhausted) {
		c.Turned.Add(1)
	}
	return resp, err
}

// Counts returns the requests counted so far, and how many of them
// tollgate refused.
func (c *Counter) Counts() (attempts, turned int) {
	return int(c.Attempts.Load()), int(c.Turned.Load())
}

// words are what prompts are made of: English, French, Japanese, emoji,
// so that characters and bytes differ.
var words = strings.Fields("the quota of every worker is shared by all processes la gare est où ? 駅 東京 ありがとう 🚀 tokens minute limit")

// Prompt returns a prompt of about n bytes, of words drawn by rng.
func Prompt(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// PerMinute sums the units of calls, in the order they arrived, per
// minute from the first: perMinute[k] holds minute k's, its last entry
// the partial minute at the end; whole is the sum of the whole minutes
// (all but that last one). Disjoint minutes, so no limiter can pass its
// limit in any of them. calls must not be empty.
func PerMinute(calls []windowcheck.Call, minute time.Duration) (perMinute []int64, whole int64) {
	first := calls[0].At
	minutes := int64(calls[len(calls)-1].At.Sub(first) / minute)
	perMinute = make([]int64, minutes+1)
	for _, c := range calls {
		k := c.At.Sub(first) / minute
		perMinute[k] += c.Units
		if int64(k) < minutes {
			whole += c.Units
		}
	}
	return perMinute, whole
}
