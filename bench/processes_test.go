package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// processes is how many client processes share the decisions of one case
// of BenchmarkProcesses.
const processes = 3

// masters is how many masters the cluster of BenchmarkProcesses has.
const masters = 3

// processScopes is how many scopes the processes of one case share.
const processScopes = 10_000

// childEnv, when set, makes the test binary a client process of
// BenchmarkProcesses: its value is the child's spec (JSON).
const childEnv = "TOLLGATE_BENCH_CHILD"

// TestMain runs the tests and benchmarks as usual, unless the binary was
// started as one of BenchmarkProcesses's client processes.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// BenchmarkProcesses measures decisions made by several client processes
// at once, as where many workers share one Redis: 3 processes, each with
// 50 callers over its own share of 10,000 scopes taken in turn, a
// one-minute window, cost 1, every decision admitting, against one
// redis-server and against a cluster of 3 masters (no replicas). Each case
// splits b.N decisions among the processes; they start together after
// each has made one decision in every scope of its share (not timed), and
// the time runs from that start to the last process's exit.
//
// Cases: redis_rate's GCRA (a million a minute per scope, so that every
// decision writes the scope's new instant), tollgate with one round trip
// per decision (WithPipelines(0)), and tollgate with shared pipelines, as
// it ships; on the cluster each runs on a redis.ClusterClient. Each case
// reports decisions/s over all processes; redis-cpu-µs/op, the CPU time
// of the Redis main threads (every master's, summed) per decision;
// redis-µs/op, the script's own time per call (INFO commandstats);
// client-cpu-µs/op, the processes' own CPU time per decision;
// busiest-redis-cpu-%, the share of the time the busiest master's main
// thread was on a core; and on the cluster decisions/s-per-master and
// each master's share of the decisions (its evalsha calls), so that the
// spread over the masters shows.
//
// On a machine with few cores (2, as CI's) the client processes and the
// Redis servers take turns on the same cores: decisions/s then measure
// the clients more than Redis, and Redis's CPU per decision is the figure
// to compare between the cases.
func BenchmarkProcesses(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range []struct {
		name  string
		start func(b *testing.B) target
	}{
		{"one-server", func(b *testing.B) target {
			s := redistest.Start(b)
			return target{addrs: []string{s.Addr}, masters: []*redis.Client{s.Client(b)}}
		}},
		{"cluster-" + strconv.Itoa(masters), func(b *testing.B) target {
			c := redistest.StartCluster(b, masters, 0)
			tg := target{addrs: c.Addrs, cluster: true}
			for _, s := range c.Nodes {
				tg.masters = append(tg.masters, s.Client(b))
			}
			return tg
		}},
	} {
		b.Run(t.name, func(b *testing.B) {
			tg := t.start(b)
			for _, kind := range []string{"redis_rate", "tollgate-unpipelined", "tollgate"} {
				b.Run(kind, func(b *testing.B) {
					runProcesses(b, exe, tg, kind)
				})
			}
		})
	}
}

// target is where a case's processes send their decisions: one server or
// a cluster's masters.
type target struct {
	addrs   []string
	cluster bool
	masters []*redis.Client // one client per master, for INFO
}

// childSpec is what a client process of BenchmarkProcesses is told to do.
type childSpec struct {
	Addrs     []string `json:"addrs"`
	Cluster   bool     `json:"cluster"`
	Limiter   string   `json:"limiter"`   // redis_rate, tollgate-unpipelined, tollgate
	Decisions int64    `json:"decisions"` // how many to make once started
	First     int      `json:"first"`     // its scopes: scope-First ... scope-(Last-1)
	Last      int      `json:"last"`
}

// childResult is what a client process reports, as one JSON line, when
// its decisions are done.
type childResult struct {
	Decisions  int64   `json:"decisions"`   // made and admitted
	Errors     int64   `json:"errors"`      // failed or refused
	FirstError string  `json:"first_error"` // the first of them, if any
	CPUMicros  float64 `json:"cpu_us"`      // its own CPU time from start to end
}

// masterStats is what one master has done so far.
type masterStats struct {
	cpu   float64 // main thread CPU, µs
	calls float64 // evalsha calls
	usec  float64 // evalsha time, µs
}

// sample reads every master's stats.
func (t target) sample(b *testing.B) []masterStats {
	s := make([]masterStats, len(t.masters))
	for i, m := range t.masters {
		s[i] = masterStats{
			cpu:   serverCPU(b, m),
			calls: commandStat(b, m, "evalsha", "calls"),
			usec:  commandStat(b, m, "evalsha", "usec"),
		}
	}
	return s
}

// child is one started client process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	done   bool // waited for
}

// stop ends the process if it still runs, and waits for it.
func (c *child) stop() {
	if c.done {
		return
	}
	c.done = true
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// fail stops the process and reports err with what it wrote on stderr.
func (c *child) fail(b *testing.B, i int, err error) {
	b.Helper()
	c.stop()
	b.Fatalf("client process %d: %v\n%s", i, err, c.stderr.Bytes())
}

// runProcesses runs one case: b.N decisions of kind split among the
// client processes, each making at least one.
func runProcesses(b *testing.B, exe string, t target, kind string) {
	children := make([]*child, processes)
	defer func() { // on failure, leave no process behind
		for _, c := range children {
			if c != nil {
				c.stop()
			}
		}
	}()
	for i := range children {
		spec := childSpec{
			Addrs:     t.addrs,
			Cluster:   t.cluster,
			Limiter:   kind,
			Decisions: int64(b.N / processes),
			First:     i * processScopes / processes,
			Last:      (i + 1) * processScopes / processes,
		}
		if i < b.N%processes {
			spec.Decisions++
		}
		spec.Decisions = max(1, spec.Decisions) // every process takes part
		raw, err := json.Marshal(spec)
		if err != nil {
			b.Fatal(err)
		}
		c := &child{cmd: exec.Command(exe)}
		c.cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
		c.cmd.Stderr = &c.stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		children[i] = c
	}
	// Each process says ready once it has warmed its scopes.
	for i, c := range children {
		line, err := c.stdout.ReadString('\n')
		if err != nil || line != "ready\n" {
			c.fail(b, i, fmt.Errorf("not ready: %q, %v", line, err))
		}
	}

	before := t.sample(b)
	b.ResetTimer()
	for i, c := range children {
		if _, err := io.WriteString(c.stdin, "start\n"); err != nil {
			c.fail(b, i, err)
		}
		c.stdin.Close()
	}
	results := make([]childResult, len(children))
	for i, c := range children {
		out, err := io.ReadAll(c.stdout)
		if err != nil {
			c.fail(b, i, err)
		}
		c.done = true
		if err := c.cmd.Wait(); err != nil {
			b.Fatalf("client process %d: %v\n%s", i, err, c.stderr.Bytes())
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &results[i]); err != nil {
			c.fail(b, i, fmt.Errorf("result %q: %v", out, err))
		}
	}
	b.StopTimer()
	after := t.sample(b)

	var decisions, childCPU float64
	for i, r := range results {
		if r.Errors > 0 {
			b.Fatalf("client process %d: %d of its decisions failed or were refused; the first: %s", i, r.Errors, r.FirstError)
		}
		decisions += float64(r.Decisions)
		childCPU += r.CPUMicros
	}
	elapsed := b.Elapsed()
	var cpu, calls, usec, busiest float64
	for i := range after {
		d := after[i].cpu - before[i].cpu
		cpu += d
		busiest = max(busiest, d)
		calls += after[i].calls - before[i].calls
		usec += after[i].usec - before[i].usec
	}
	b.ReportMetric(decisions/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(cpu/decisions, "redis-cpu-µs/op")
	if calls > 0 {
		b.ReportMetric(usec/calls, "redis-µs/op")
	}
	b.ReportMetric(childCPU/decisions, "client-cpu-µs/op")
	b.ReportMetric(100*busiest/float64(elapsed.Microseconds()), "busiest-redis-cpu-%")
	if t.cluster {
		b.ReportMetric(decisions/elapsed.Seconds()/float64(len(t.masters)), "decisions/s-per-master")
		for i := range after {
			if calls > 0 {
				b.ReportMetric((after[i].calls-before[i].calls)/calls, "master-"+strconv.Itoa(i+1)+"-share")
			}
		}
	}
}

// runChild is a client process's whole life: spec is its childSpec. It
// makes one decision in each of its scopes, says "ready" on stdout, waits
// for a line on stdin, makes its decisions, and writes its childResult.
// It returns the process's exit status.
func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n", childEnv, err)
		return 2
	}
	r, err := s.run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// run warms the scopes, signals ready on out, waits for the start line on
// in, and makes the decisions with callers goroutines.
func (s childSpec) run(in io.Reader, out io.Writer) (childResult, error) {
	var rdb redis.UniversalClient
	if s.Cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.Addrs, PoolSize: callers})
	} else if len(s.Addrs) == 1 {
		rdb = redis.NewClient(&redis.Options{Addr: s.Addrs[0], PoolSize: callers})
	} else {
		return childResult{}, fmt.Errorf("one address or a cluster, not %q", s.Addrs)
	}
	defer rdb.Close()
	decide, err := decider(rdb, s.Limiter)
	if err != nil {
		return childResult{}, err
	}
	if s.Last <= s.First {
		return childResult{}, fmt.Errorf("no scopes in [%d, %d)", s.First, s.Last)
	}
	scopes := make([]string, 0, s.Last-s.First)
	for i := s.First; i < s.Last; i++ {
		scopes = append(scopes, "scope-"+strconv.Itoa(i))
	}
	ctx := context.Background()

	// The callers take the scopes in turn, wherever another left off; the
	// warm-up visits each once.
	var next atomic.Int64
	var warm atomic.Int64
	var warmErr error
	var warmOnce, runOnce sync.Once
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for warm.Add(1) <= int64(len(scopes)) {
				if err := decide(ctx, scopes[int(next.Add(1)-1)%len(scopes)]); err != nil {
					warmOnce.Do(func() { warmErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if warmErr != nil {
		return childResult{}, fmt.Errorf("warm-up: %w", warmErr)
	}
	if _, err := io.WriteString(out, "ready\n"); err != nil {
		return childResult{}, err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return childResult{}, fmt.Errorf("no start: %w", err)
	}

	var r childResult
	start, err := processCPU()
	if err != nil {
		return r, err
	}
	var left, done, failed atomic.Int64
	left.Store(s.Decisions)
	for range callers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := decide(ctx, scopes[int(next.Add(1)-1)%len(scopes)]); err != nil {
					failed.Add(1)
					runOnce.Do(func() { r.FirstError = err.Error() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	end, err := processCPU()
	if err != nil {
		return r, err
	}
	r.Decisions, r.Errors, r.CPUMicros = done.Load(), failed.Load(), end-start
	return r, nil
}

// decider returns one decision of the named kind in a scope, on rdb.
func decider(rdb redis.UniversalClient, kind string) (func(ctx context.Context, scope string) error, error) {
	switch kind {
	case "redis_rate":
		rr := redis_rate.NewLimiter(rdb)
		// A million a minute per scope: never reached here, and every
		// decision writes the scope's new instant, as a GCRA must.
		limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
		return func(ctx context.Context, scope string) error {
			res, err := rr.AllowN(ctx, scope, limit, 1)
			if err == nil && res.Allowed != 1 {
				err = errRefused
			}
			return err
		}, nil
	case "tollgate", "tollgate-unpipelined":
		var opts []quota.Option
		if kind == "tollgate-unpipelined" {
			opts = append(opts, quota.WithPipelines(0))
		}
		lim, err := quota.New(rdb, opts...)
		if err != nil {
			return nil, err
		}
		c := quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{never(time.Minute)}}
		return func(ctx context.Context, scope string) error {
			res, err := lim.Allow(ctx, scope, c)
			if err == nil && !res.OK() {
				err = errRefused
			}
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown limiter %q", kind)
}

// processCPU reads the CPU time (µs) this process has used, every thread,
// in user and system mode.
func processCPU() (float64, error) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, err
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e3, nil
}
