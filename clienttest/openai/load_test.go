package openai_test

import (
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/internal/oaisim"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
)

// realTimeEnv, set to 1, runs the load test on the real clock.
const realTimeEnv = "TOLLGATE_OPENAI_REALTIME"

// TestManyProcesses: three processes of eight goroutines send chat
// completions and responses (varied prompts and allowances, streamed or
// not) and embeddings through their own Transports, sharing one Redis,
// to a simulated API that meters each model's requests and tokens per
// minute as OpenAI does. The Transports know no limit but what the
// headers announce. Required: no 429 from any limit, in no minute more
// tokens (or requests) than a limit, and at least 70% of each model's
// binding limit (tokens per minute) used.
func TestManyProcesses(t *testing.T) {
	minute, duration, transit := 4*time.Second, 14*time.Second, 250*time.Millisecond
	if rig.Race {
		transit = 500 * time.Millisecond
	}
	if os.Getenv(realTimeEnv) == "1" {
		minute, duration, transit = time.Minute, 4*time.Minute, 0
	} else {
		t.Logf("a minute lasts %v here; %s=1 runs the real clock", minute, realTimeEnv)
	}
	limits := map[string]oaisim.Limits{
		chatModel:  {RPM: 1000, TPM: 30000},
		embedModel: {RPM: 1000, TPM: 6000},
	}
	sim := oaisim.New(oaisim.Config{Models: limits, Minute: minute})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	rdb := redistest.Start(t)

	const procs, workers = 3, 8
	start := time.Now().Add(2 * time.Second) // time for every process to boot
	var cfgs []any
	for p := range procs {
		cfgs = append(cfgs, childConfig{API: api.URL, Redis: rdb.Addr, Key: "sk-load", Minute: minute, Transit: transit,
			Start: start, Duration: duration, Workers: workers, Process: p})
	}
	reports := rig.Wait[[]workerResult](t, rig.Start(t, childEnv, cfgs...))
	var calls, streamed, cut int
	var firstCut time.Time // the first worker to stop
	var firstCutWait time.Duration
	for _, rs := range reports {
		for _, r := range rs {
			calls, streamed, cut = calls+r.Calls, streamed+r.Streamed, cut+r.Cut
			if !r.CutAt.IsZero() && (firstCut.IsZero() || r.CutAt.Before(firstCut)) {
				firstCut, firstCutWait = r.CutAt, r.CutWait
			}
			if r.Failed > 0 {
				t.Errorf("process %d worker %d: %d failures, first: %s", r.Process, r.Worker, r.Failed, r.FirstErr)
			}
		}
	}
	t.Logf("%d calls answered (%d streamed), %d cut off by the end of the run, the first %v after the start (its turn %v away)",
		calls, streamed, cut, firstCut.Sub(start).Round(time.Millisecond), firstCutWait.Round(time.Millisecond))

	arrivals := sim.Arrivals()
	byModel := map[string][]oaisim.Arrival{}
	for _, a := range arrivals {
		if a.Status != 200 {
			t.Errorf("the upstream answered %d %s to a %s request at %v", a.Status, a.Code, a.Model, a.At.Format(time.StampMilli))
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
		for i, a := range as {
			tokens[i] = windowcheck.Call{At: a.At, Units: a.Tokens}
			requests[i] = windowcheck.Call{At: a.At, Units: 1}
		}
		mostTokens, _ := windowcheck.Most(tokens, minute)
		mostRequests, _ := windowcheck.Most(requests, minute)
		// The share of the TPM used: the tokens of the whole minutes from
		// the first arrival, over what those minutes allow. Disjoint
		// minutes, so no limiter, however exact, can pass 100%; a partial
		// minute at the end would be measured against a full minute's
		// worth, which may still be waiting in line.
		perMinute, total := rig.PerMinute(tokens, minute)
		minutes := int64(len(perMinute) - 1)
		used := float64(total) / float64(minutes*lim.TPM)
		t.Logf("%s: %d requests; at most %d tokens (TPM %d) and %d requests (RPM %d) in a minute; %d tokens in the first %d whole minutes (%v, then %d), %.1f%% of what the TPM allows",
			model, len(as), mostTokens, lim.TPM, mostRequests, lim.RPM, total, minutes, perMinute[:minutes], perMinute[minutes], 100*used)
		if mostTokens > lim.TPM || mostRequests > lim.RPM {
			t.Errorf("%s: a minute held %d tokens and %d requests, over the limits %d and %d", model, mostTokens, mostRequests, lim.TPM, lim.RPM)
		}
		if used < 0.7 {
			t.Errorf("%s: %.1f%% of the binding limit used, want at least 70%%", model, 100*used)
		}
	}
}
