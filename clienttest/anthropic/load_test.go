package anthropic_test

import (
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/anthsim"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// realTimeEnv, set to 1, runs the load tests on the real clock.
const realTimeEnv = "TOLLGATE_ANTHROPIC_REALTIME"

// The load: three processes of six goroutines, four asking Sonnet, two
// Haiku (a third of Haiku's with a cached system prompt), JSON and
// streamed, through the SDK with its default retries.
const procs, workers = 3, 6

// classes are the organization's limits per model class, as the simulated
// API enforces them; the Transports are told none and learn them. Sonnet's
// binding limit is its OTPM (charged max_tokens, settled to the output),
// Haiku's its RPM.
var classes = map[string]anthsim.Limits{
	"claude-sonnet-4": {RPM: 1000, ITPM: 80000, OTPM: 16000},
	"claude-haiku-4":  {RPM: 60, ITPM: 200000, OTPM: 100000},
}

// binding names each class's binding limit.
var binding = map[string]string{"claude-sonnet-4": anthsim.OutputTokens, "claude-haiku-4": anthsim.Requests}

// overloadEvery is how often the API answers 529 overloaded_error.
const overloadEvery = 40

// clock returns the run's minute, its length and Transit.
func clock(t *testing.T) (minute, duration, transit time.Duration) {
	minute, duration, transit = 4*time.Second, 14*time.Second, 250*time.Millisecond
	if rig.Race {
		transit = 500 * time.Millisecond
	}
	if os.Getenv(realTimeEnv) == "1" {
		return time.Minute, 4 * time.Minute, 0
	}
	t.Logf("a minute lasts %v here; %s=1 runs the real clock", minute, realTimeEnv)
	return minute, duration, transit
}

// run starts the simulated API and the worker processes (through tollgate
// on one redis-server unless control), waits for them, and returns the
// API and the workers' results.
func run(t *testing.T, control bool, minute, duration, transit time.Duration) (*anthsim.Server, []workerResult) {
	t.Helper()
	sim := anthsim.New(anthsim.Config{Classes: classes, Minute: minute, OverloadEvery: overloadEvery})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	var redisAddr string
	if !control {
		redisAddr = redistest.Start(t).Addr
	}
	start := time.Now().Add(2 * time.Second) // time for every process to boot
	var cfgs []any
	for p := range procs {
		cfgs = append(cfgs, childConfig{Config: rig.Config{API: api.URL, Redis: redisAddr, Key: "sk-ant-load-key",
			Minute: minute, Transit: transit, Start: start, Duration: duration, Workers: workers, Process: p}})
	}
	var all []workerResult
	for _, rs := range rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...)) {
		all = append(all, rs...)
	}
	return sim, all
}

// TestManyProcesses: the load through tollgate. Required: no 429; every
// bucket of every class within the upstream's token bucket (capacity C
// refilled at C a minute: in any span Δ, at most C + C·Δ/minute); and the
// binding limit of each class at least 70% used over the whole minutes of
// the run.
func TestManyProcesses(t *testing.T) {
	minute, duration, transit := clock(t)
	sim, results := run(t, false, minute, duration, transit)
	var calls, streamed, cut, attempts, turned, overloaded int
	for _, r := range results {
		calls, streamed, cut, overloaded = calls+r.Calls, streamed+r.Streamed, cut+r.Cut, overloaded+r.Overloaded
		attempts, turned = attempts+r.Attempts, turned+r.Turned
		if r.Failed > 0 || r.Refused > 0 {
			t.Errorf("process %d worker %d: %d calls refused by the API, %d failures, first: %s", r.Process, r.Worker, r.Refused, r.Failed, r.FirstErr)
		}
	}
	st := sim.Stats()
	t.Logf("%d calls answered (%d streamed), %d ended in 529 after the SDK's retries, %d workers cut off by the end of the run; the SDK made %d attempts, %d refused by tollgate; the API answered %d 529s",
		calls, streamed, overloaded, cut, attempts, turned, st.Overloaded)
	refused := 0
	for _, n := range st.Refused {
		refused += n
	}
	if refused > 0 {
		t.Errorf("the API answered 429 %d times: %v", refused, st.Refused)
	}
	check(t, sim, minute)
}

// check checks each class's arrivals against its limits, and logs the
// figures: what a minute held at most, how deep each bucket was drawn,
// and the binding limit's use.
func check(t *testing.T, sim *anthsim.Server, minute time.Duration) {
	t.Helper()
	byClass := map[string][]anthsim.Arrival{}
	for _, a := range sim.Arrivals() {
		if a.Status == 200 {
			byClass[a.Class] = append(byClass[a.Class], a)
		}
	}
	st := sim.Stats()
	for class, lim := range classes {
		as := byClass[class]
		if len(as) < 2 || as[len(as)-1].At.Sub(as[0].At) < minute {
			t.Errorf("%s: %d requests answered, in less than a minute", class, len(as))
			continue
		}
		caps := map[string]int64{anthsim.Requests: lim.RPM, anthsim.InputTokens: lim.ITPM, anthsim.OutputTokens: lim.OTPM}
		units := map[string]func(anthsim.Arrival) int64{
			anthsim.Requests:     func(anthsim.Arrival) int64 { return 1 },
			anthsim.InputTokens:  func(a anthsim.Arrival) int64 { return a.Input },
			anthsim.OutputTokens: func(a anthsim.Arrival) int64 { return a.Output },
		}
		for _, b := range []string{anthsim.Requests, anthsim.InputTokens, anthsim.OutputTokens} {
			calls := make([]windowcheck.Call, len(as))
			for i, a := range as {
				calls[i] = windowcheck.Call{At: a.At, Units: units[b](a)}
			}
			most, _ := windowcheck.Most(calls, minute)
			over := overBucket(calls, caps[b], minute)
			// The share used: the units of the whole minutes from the
			// first arrival, over what those minutes allow.
			perMinute, total := rig.PerMinute(calls, minute)
			minutes := int64(len(perMinute) - 1)
			used := float64(total) / float64(max(minutes, 1)*caps[b])
			t.Logf("%s %s (limit %d): at most %d in a minute, bucket drawn %d deep at most, per whole minute %v: %.1f%% used",
				class, b, caps[b], most, st.MaxUse[class][b], perMinute[:minutes], 100*used)
			if over > 0 {
				t.Errorf("%s %s: %d units over the upstream's token bucket of %d a minute", class, b, over, caps[b])
			}
			if binding[class] == b && used < 0.7 {
				t.Errorf("%s: %.1f%% of the binding limit (%s) used, want at least 70%%", class, 100*used, b)
			}
		}
	}
}

// overBucket returns how far calls go over a token bucket of capacity c
// refilled at c a minute, full at the start: the most, over every span
// [t_i, t_j] of arrivals, by which the units arrived in it pass
// c + c·(t_j - t_i)/minute; 0 when they never do.
func overBucket(calls []windowcheck.Call, c int64, minute time.Duration) int64 {
	var worst float64
	for i := range calls {
		var sum int64
		for j := i; j < len(calls); j++ {
			sum += calls[j].Units
			allowed := float64(c) + float64(c)*float64(calls[j].At.Sub(calls[i].At))/float64(minute)
			worst = max(worst, float64(sum)-allowed)
		}
	}
	return int64(worst)
}

// TestWithoutTollgate: the control run, the same load straight to the API
// with the SDK's default retries: the API refuses it, the SDK retrying
// each 429 for its retry-after.
func TestWithoutTollgate(t *testing.T) {
	minute, duration, transit := clock(t)
	sim, results := run(t, true, minute, duration, transit)
	var calls, refused, attempts int
	for _, r := range results {
		calls, refused, attempts = calls+r.Calls, refused+r.Refused, attempts+r.Attempts
	}
	st := sim.Stats()
	arrivals := sim.Arrivals()
	n429 := 0
	for _, n := range st.Refused {
		n429 += n
	}
	t.Logf("without tollgate: %d calls answered, %d ended in 429 after the SDK's retries; the API answered 429 to %d of %d requests (%.1f%%): %v, and 529 to %d",
		calls, refused, n429, len(arrivals), 100*float64(n429)/float64(len(arrivals)), st.Refused, st.Overloaded)
	if st.Refused[anthsim.OutputTokens] == 0 || st.Refused[anthsim.Requests] == 0 {
		t.Errorf("the control run was refused %v, want refusals of output tokens (Sonnet) and requests (Haiku)", st.Refused)
	}
}
