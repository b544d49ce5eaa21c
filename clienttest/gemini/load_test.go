package gemini_test

import (
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/gemsim"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/providers/gemini"
)

// realTimeEnv, set to 1, runs the load tests on the real clock.
const realTimeEnv = "TOLLGATE_GEMINI_REALTIME"

// The load: three processes of six goroutines, four asking the chat model
// (varied prompts, a system instruction, streamed or not), two embedding
// batches of one to five texts. The chat model's binding limit is its
// input tokens per minute; the embedding model's, its requests per day,
// spent within the run.
const procs, workers = 3, 6

// limits are the project's limits, as the simulated API enforces them and
// the Transports are told.
var limits = map[string]gemini.Limits{
	chatModel:  {RPM: 1000, TPM: 8000, RPD: 100000},
	embedModel: {RPM: 60, TPM: 100000, RPD: 200},
}

// clock returns the run's minute, its length and Transit.
func clock(t *testing.T) (minute, duration, transit time.Duration) {
	minute, duration, transit = 2*time.Second, 10*time.Second, 250*time.Millisecond
	if rig.Race {
		transit = 400 * time.Millisecond
	}
	if os.Getenv(realTimeEnv) == "1" {
		return time.Minute, 4 * time.Minute, 0
	}
	t.Logf("a minute lasts %v here, a day 1440 of them; %s=1 runs the real clock", minute, realTimeEnv)
	return minute, duration, transit
}

// run starts the simulated API and the worker processes (through tollgate
// on one redis-server unless control), waits for them, and returns the
// API's arrivals and the workers' results.
func run(t *testing.T, control, retries bool, minute, duration, transit time.Duration) ([]gemsim.Arrival, []workerResult, time.Time) {
	t.Helper()
	simLimits := map[string]gemsim.Limits{}
	for m, l := range limits {
		simLimits[m] = gemsim.Limits{RPM: l.RPM, TPM: l.TPM, RPD: l.RPD}
	}
	sim := gemsim.New(gemsim.Config{Models: simLimits, Minute: minute})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	var redisAddr string
	if !control {
		redisAddr = redistest.Start(t).Addr
	}
	start := time.Now().Add(2 * time.Second) // time for every process to boot
	var cfgs []any
	for p := range procs {
		cfgs = append(cfgs, childConfig{Config: rig.Config{API: api.URL, Redis: redisAddr, Key: "AIzaSy-load-key",
			Minute: minute, Transit: transit, Start: start, Duration: duration, Workers: workers, Process: p},
			Limits: limits, Retries: retries})
	}
	var all []workerResult
	for _, rs := range rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...)) {
		all = append(all, rs...)
	}
	return sim.Arrivals(), all, start
}

// TestManyProcesses: the load through tollgate, with the SDK's default
// (no retries) and with HTTPOptions.RetryOptions set. Required: no 429,
// in no minute more input tokens or requests than a limit, the day's
// requests never over RPD (and at least 90% of them spent), and at least
// 70% of the chat model's TPM used in the whole minutes of the run.
func TestManyProcesses(t *testing.T) {
	minute, duration, transit := clock(t)
	for _, c := range []struct {
		name    string
		retries bool
	}{{"no retries", false}, {"RetryOptions", true}} {
		t.Run(c.name, func(t *testing.T) {
			arrivals, results, start := run(t, false, c.retries, minute, duration, transit)
			var calls, streamed, embedded, cut, attempts, turned int
			for _, r := range results {
				calls, streamed, embedded, cut = calls+r.Calls, streamed+r.Streamed, embedded+r.Embedded, cut+r.Cut
				attempts, turned = attempts+r.Attempts, turned+r.Turned
				if r.Failed > 0 || r.Refused > 0 {
					t.Errorf("process %d worker %d: %d refused by the API, %d failures, first: %s", r.Process, r.Worker, r.Refused, r.Failed, r.FirstErr)
				}
			}
			t.Logf("%d calls answered (%d streamed, %d texts embedded), %d workers cut off by the end of the run; the SDK made %d attempts, %d refused by tollgate",
				calls, streamed, embedded, cut, attempts, turned)
			check(t, arrivals, start, minute)
		})
	}
}

// check checks the arrivals against the limits, and logs the figures.
func check(t *testing.T, arrivals []gemsim.Arrival, start time.Time, minute time.Duration) {
	t.Helper()
	byModel := map[string][]gemsim.Arrival{}
	for _, a := range arrivals {
		if a.Status != 200 {
			t.Errorf("the API answered %d (%s) to a %s request at %v", a.Status, a.Limit, a.Model, a.At.Sub(start))
			continue
		}
		byModel[a.Model] = append(byModel[a.Model], a)
	}
	for model, lim := range limits {
		as := byModel[model]
		if len(as) < 2 || as[len(as)-1].At.Sub(as[0].At) < minute {
			t.Errorf("%s: %d requests arrived, in less than a minute", model, len(as))
			continue
		}
		tokens := make([]windowcheck.Call, len(as))
		requests := make([]windowcheck.Call, len(as))
		var day int64
		for i, a := range as {
			tokens[i] = windowcheck.Call{At: a.At, Units: a.Tokens}
			requests[i] = windowcheck.Call{At: a.At, Units: a.Requests}
			day += a.Requests
		}
		mostTokens, _ := windowcheck.Most(tokens, minute)
		mostRequests, _ := windowcheck.Most(requests, minute)
		// The share of the TPM used: the tokens of the whole minutes from
		// the first arrival, over what those minutes allow (disjoint
		// minutes, so no limiter can pass 100%).
		perMinute, total := rig.PerMinute(tokens, minute)
		minutes := int64(len(perMinute) - 1)
		used := float64(total) / float64(max(minutes, 1)*lim.TPM)
		t.Logf("%s: %d requests (%d counted: RPD %d); at most %d input tokens (TPM %d) and %d requests (RPM %d) in a minute; tokens per whole minute %v, %.1f%% of the TPM",
			model, len(as), day, lim.RPD, mostTokens, lim.TPM, mostRequests, lim.RPM, perMinute[:minutes], 100*used)
		if mostTokens > lim.TPM || mostRequests > lim.RPM || day > lim.RPD {
			t.Errorf("%s: a minute held %d tokens and %d requests, the day %d requests: over the limits %+v", model, mostTokens, mostRequests, day, lim)
		}
		switch model {
		case chatModel:
			if used < 0.7 {
				t.Errorf("%s: %.1f%% of the binding limit (TPM) used, want at least 70%%", model, 100*used)
			}
		case embedModel:
			if float64(day) < 0.9*float64(lim.RPD) {
				t.Errorf("%s: %d of the day's %d requests spent, want at least 90%%", model, day, lim.RPD)
			}
		}
	}
}

// TestWithoutTollgate: the control run, the same load straight to the API
// with the SDK's default (no retries): the API refuses it.
func TestWithoutTollgate(t *testing.T) {
	minute, duration, transit := clock(t)
	duration = min(duration, 3*minute)
	arrivals, results, _ := run(t, true, false, minute, duration, transit)
	var calls, refused int
	for _, r := range results {
		calls, refused = calls+r.Calls, refused+r.Refused
	}
	byLimit := map[string]int{}
	refusedModels := map[string]int{}
	for _, a := range arrivals {
		if a.Status == 429 {
			byLimit[a.Limit]++
			refusedModels[a.Model]++
		}
	}
	t.Logf("without tollgate: %d calls answered, %d refused 429 (%.1f%% of %d sent): %v",
		calls, refused, 100*float64(refused)/float64(len(arrivals)), len(arrivals), byLimit)
	if refused == 0 || byLimit[gemsim.QuotaTPM] == 0 || refusedModels[chatModel] == 0 || refusedModels[embedModel] == 0 {
		t.Errorf("the control run was refused %d times (%v, by model %v), want refusals of both models, the chat model's TPM among them", refused, byLimit, refusedModels)
	}
}
