package anthropic_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/anthsim"
	"github.com/tollgate/tollgate/internal/providertest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/quota"
)

const key = "sk-ant-api03-test-0123456789"

// harness is a Transport in front of a simulated API on loopback.
type harness struct {
	t   *testing.T
	sim *anthsim.Server
	url string
	tr  *anthropic.Transport

	mu      sync.Mutex
	settled []tollgate.Decision
}

// newHarness starts a simulator (or uses sim) and a Transport on rdb
// (nil: in-process), whose limiter's clock is frozen (see frozen).
func newHarness(t *testing.T, sim *anthsim.Server, rdb redis.UniversalClient, opts anthropic.Options) *harness {
	t.Helper()
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	h := &harness{t: t, sim: sim, url: api.URL}
	frozen(&opts)
	opts.Tollgate.Trace.Settled = func(_ context.Context, d tollgate.Decision) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.settled = append(h.settled, d)
	}
	tr, err := anthropic.NewTransport(rdb, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	h.tr = tr
	return h
}

// frozen stops the clock the Transport built from opts decides on, at
// the instant the test starts: its token buckets do not refill while the
// test runs, so that what Usage reads of them is what was counted, to the
// unit, however slow the machine.
func frozen(opts *anthropic.Options) {
	start := time.Now()
	anthropic.SetClock(opts, func() time.Time { return start })
}

// defaultTransit is the Transit of a tollgate.Config that sets none.
const defaultTransit = 50 * time.Millisecond

// enforced is the capacity tollgate keeps of an upstream bucket of
// perMinute units (less the reserve), refilled at perMinute a minute: the
// refill of defaultTransit less, as a request admitted now may reach the
// upstream that much later.
func enforced(perMinute int64) int64 {
	return perMinute - (perMinute*int64(defaultTransit)+int64(time.Minute)-1)/int64(time.Minute)
}

// post sends a Messages request with the key and reads its answer whole.
func (h *harness) post(body string) (*http.Response, string, error) {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.url+"/v1/messages", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	return providertest.Send(h.tr, req)
}

// used returns what the Transport counts in a scope's bucket, and the
// limit it enforces.
func (h *harness) used(scope, bucket string) (int64, int64) {
	h.t.Helper()
	return providertest.Used(h.t, h.tr, scope, bucket)
}

// message is a Messages body.
func message(model, text string, maxTokens int, stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{"model":"` + model + `",` + s + `"max_tokens":` + itoa(maxTokens) + `,"messages":[{"role":"user","content":"` + text + `"}]}`
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestLearnsAndSettles: each class spends its own buckets, whose limits
// (less the 5% reserve, and less Transit's refill: see enforced) are learned from the anthropic-ratelimit-* headers
// of its first answer (that request goes alone, and counts what the
// headers announce); every later request is settled to what its answer's
// usage tells, from the JSON body and from the stream (message_start for
// the input, message_delta for the output).
func TestLearnsAndSettles(t *testing.T) {
	sim := anthsim.New(anthsim.Config{Classes: map[string]anthsim.Limits{
		"claude-sonnet-4": {RPM: 100, ITPM: 40000, OTPM: 16000},
		"claude-haiku-4":  {RPM: 200, ITPM: 50000, OTPM: 10000},
	}})
	h := newHarness(t, sim, nil, anthropic.Options{})
	for _, c := range []struct {
		model           string
		rpm, itpm, otpm int64
	}{
		{"claude-sonnet-4-5", 95, 38000, 15200},
		{"claude-haiku-4-5-20251001", 190, 47500, 9500},
	} {
		for i := range 4 {
			resp, body, err := h.post(message(c.model, strings.Repeat("word ", 40+i), 500, i%2 == 1))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %v %v %s", c.model, resp, err, body)
			}
		}
		scope := anthropic.Scope(key, c.model)
		requests, rpm := h.used(scope, anthropic.Requests)
		_, itpm := h.used(scope, anthropic.InputTokens)
		_, otpm := h.used(scope, anthropic.OutputTokens)
		if requests != 4 || rpm != enforced(c.rpm) || itpm != enforced(c.itpm) || otpm != enforced(c.otpm) {
			t.Errorf("%s: %d requests of %d, limits %d and %d; want 4 of %d, %d, %d", c.model, requests, rpm, itpm, otpm,
				enforced(c.rpm), enforced(c.itpm), enforced(c.otpm))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var arrivals []anthsim.Arrival
	for i, a := range sim.Arrivals() {
		if i%4 != 0 { // the first of each class went alone, unsettled
			arrivals = append(arrivals, a)
		}
	}
	if len(h.settled) != len(arrivals) {
		t.Fatalf("%d requests settled, want %d", len(h.settled), len(arrivals))
	}
	for i, d := range h.settled {
		a := arrivals[i]
		want := map[string]int64{anthropic.Requests: 1, anthropic.InputTokens: a.Usage.InputTokens, anthropic.OutputTokens: a.Usage.OutputTokens}
		for _, ch := range d.Charges {
			if ch.Units != want[ch.Bucket] {
				t.Errorf("request %d (stream %v): %s settled to %d, its answer told %d", i, a.Stream, ch.Bucket, ch.Units, want[ch.Bucket])
			}
		}
		if len(d.Charges) != 3 || d.Err != nil {
			t.Errorf("request %d: settled %+v", i, d)
		}
	}
}

// silent is a Base that drops the anthropic-ratelimit-* headers, so that
// tollgate's count is its own, never raised to an announcement rounded to
// thousands.
type silent struct{}

func (silent) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		for k := range resp.Header {
			if strings.HasPrefix(k, "Anthropic-Ratelimit-") {
				delete(resp.Header, k)
			}
		}
	}
	return resp, err
}

// cached is a Messages body whose system prompt (a prefix of a few
// thousand tokens) is marked for the prompt cache.
func cached(model, system string, stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{"model":"` + model + `",` + s + `"max_tokens":300,"system":[{"type":"text","text":"` + strings.Repeat(system+" ", 400) +
		`","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
}

// TestCachedSettlesAsITPMCounts: a request with cache_control settles its
// input to what ITPM counts of it, from the JSON answer and from the
// stream's message_start: input_tokens and cache_creation_input_tokens,
// and cache_read_input_tokens only for the classes whose cache reads
// count (by default Claude Haiku 3.5's and 3's, as the rate limits page
// marks them; any class by Options.CacheReads). So tollgate's count of
// ITPM is the simulator's, whose classes count as the page says.
func TestCachedSettlesAsITPMCounts(t *testing.T) {
	for _, c := range []struct {
		name       string
		model      string
		sim        map[string]anthsim.Limits // the simulator's classes
		cacheReads func(string) bool
		reads      bool // tollgate counts the cache reads
	}{
		{name: "current model: reads do not count", model: "claude-sonnet-4-5"},
		{name: "Haiku 3.5: reads count by default", model: "claude-3-5-haiku-20241022",
			sim: map[string]anthsim.Limits{"claude-3-5-haiku": {CacheReads: true}}, reads: true},
		{name: "a class marked by Options.CacheReads", model: "claude-sonnet-4-5",
			sim:        map[string]anthsim.Limits{"claude-sonnet-4": {CacheReads: true}},
			cacheReads: func(class string) bool { return class == "claude-sonnet-4" }, reads: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sim := anthsim.New(anthsim.Config{Classes: c.sim, Limits: anthsim.Limits{RPM: 50, ITPM: 100000, OTPM: 8000}})
			h := newHarness(t, sim, nil, anthropic.Options{Base: silent{}, CacheReads: c.cacheReads,
				Limits: anthropic.Limits{RPM: 50, ITPM: 100000, OTPM: 8000}})
			// A prefix written (JSON), then read (stream); another written
			// (stream), then read (JSON).
			for i, b := range []string{cached(c.model, "rule", false), cached(c.model, "rule", true), cached(c.model, "law", true), cached(c.model, "law", false)} {
				if resp, body, err := h.post(b); err != nil || resp.StatusCode != 200 {
					t.Fatalf("request %d: %v %v %s", i, resp, err, body)
				}
			}
			as := sim.Arrivals()
			var counts, reads int64 // what the simulator counts in ITPM; the cache reads
			for i, a := range as {
				counts += a.Input
				reads += a.Usage.CacheReadInputTokens
				if wrote := i%2 == 0; wrote != (a.Usage.CacheCreationInputTokens > 0) || wrote == (a.Usage.CacheReadInputTokens > 0) {
					t.Fatalf("request %d: usage %+v, want the prefix written by the first of each pair, read by the second", i, a.Usage)
				}
			}
			if reads == 0 {
				t.Fatal("nothing was read from the cache: the case cannot tell the settings apart")
			}
			input, _ := h.used(anthropic.Scope(key, c.model), anthropic.InputTokens)
			if input != counts {
				t.Errorf("tollgate counts %d input tokens, the simulator %d (cache reads %d, counted: %v)", input, counts, reads, c.reads)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.settled) != len(as) {
				t.Fatalf("%d requests settled, want %d", len(h.settled), len(as))
			}
			for i, d := range h.settled {
				for _, ch := range d.Charges {
					if ch.Bucket == anthropic.InputTokens && ch.Units != as[i].Usage.InputTokens {
						t.Errorf("request %d: input settled to %d, input_tokens %d", i, ch.Units, as[i].Usage.InputTokens)
					}
				}
			}
		})
	}
}

// TestCachedThroughRoutesKeepsTheEstimate: with Options.Tollgate.Routes,
// whose scopes are their own, a cached request keeps its input estimate
// (its bytes); a request without cache_control still settles.
func TestCachedThroughRoutesKeepsTheEstimate(t *testing.T) {
	sim := anthsim.New(anthsim.Config{})
	h := newHarness(t, sim, nil, anthropic.Options{Base: silent{}, Limits: anthropic.Limits{RPM: 50, ITPM: 100000, OTPM: 8000},
		Tollgate: tollgate.Config{Routes: []tollgate.Route{{Name: "other", Scope: "other-org/claude-sonnet-4"}}}})
	body := cached("claude-sonnet-4-5", "rule", false)
	for range 2 {
		if resp, b, err := h.post(body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v %s", resp, err, b)
		}
	}
	input, _ := h.used(anthropic.Scope(key, "claude-sonnet-4-5"), anthropic.InputTokens)
	if input != 2*int64(len(body)) {
		t.Errorf("tollgate counts %d input tokens, want %d: the estimates", input, 2*len(body))
	}
}

// stub is an upstream that answers every request alike, and counts them.
type stub struct {
	status int
	header map[string]string
	body   string

	mu   sync.Mutex
	hits int
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits++
	s.mu.Unlock()
	io.Copy(io.Discard, r.Body)
	for k, v := range s.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	io.WriteString(w, s.body)
}

func (s *stub) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.hits }

// stubHarness is a Transport in front of s, on rdb.
func stubHarness(t *testing.T, s *stub, rdb redis.UniversalClient, opts anthropic.Options) *harness {
	t.Helper()
	api := httptest.NewServer(s)
	t.Cleanup(api.Close)
	frozen(&opts)
	tr, err := anthropic.NewTransport(rdb, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &harness{t: t, url: api.URL, tr: tr}
}

// refuse is the policy of the tests that want tollgate's refusals as
// errors.
var refuse = tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}

// TestRateLimitPausesTheClass: a 429 rate_limit_error pauses the class's
// spent bucket for every process sharing the Redis, for its retry-after;
// the refusal matches tollgate.ErrQuotaExhausted; another class still
// goes.
func TestRateLimitPausesTheClass(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	s := &stub{status: 429, header: map[string]string{"Retry-After": "20",
		"Anthropic-Ratelimit-Output-Tokens-Limit": "8000", "Anthropic-Ratelimit-Output-Tokens-Remaining": "0",
		"Anthropic-Ratelimit-Output-Tokens-Reset": time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339)},
		body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit."}}`}
	told := anthropic.Options{Limits: anthropic.Limits{RPM: 1000, ITPM: 100000, OTPM: 100000}, Tollgate: refuse}
	a := stubHarness(t, s, rdb, told)
	b := stubHarness(t, s, rdb, told)
	// The upstream's 429 comes back as tollgate's error: the Transport
	// read it and paused the bucket.
	_, _, err := a.post(message("claude-sonnet-4-5", "hi", 400, false))
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Bucket != anthropic.OutputTokens {
		t.Fatalf("%v, want the upstream's 429 read as a pause of the output tokens", err)
	}
	_, _, err = b.post(message("claude-sonnet-4-5", "hi", 10, true))
	if !errors.Is(err, tollgate.ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream ||
		qe.Bucket != anthropic.OutputTokens || qe.RetryAfter < 15*time.Second || qe.RetryAfter > 20*time.Second {
		t.Fatalf("another process: %v (%+v), want a refusal for the output tokens paused 20s", err, qe)
	}
	if s.count() != 1 {
		t.Errorf("the paused request reached the upstream")
	}
	s.mu.Lock()
	s.status, s.body = 200, `{"type":"message","usage":{"input_tokens":3,"output_tokens":2}}`
	s.mu.Unlock()
	if resp, _, err := b.post(message("claude-opus-4-1", "hi", 10, false)); err != nil || resp.StatusCode != 200 {
		t.Errorf("another class: %v %v, want 200", resp, err)
	}
}

// TestOverloadedAndTooLargePauseNothing: 529 overloaded_error and 413
// request_too_large are returned as they are and pause nothing; their
// output tokens are given back.
func TestOverloadedAndTooLargePauseNothing(t *testing.T) {
	sim := anthsim.New(anthsim.Config{OverloadEvery: 2, MaxBody: 2000})
	h := newHarness(t, sim, nil, anthropic.Options{Limits: anthropic.Limits{RPM: 50, ITPM: 30000, OTPM: 8000},
		Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)}})
	var codes []int
	for _, body := range []string{
		message("claude-sonnet-4-5", "hi", 1000, false),
		message("claude-sonnet-4-5", "hi", 1000, false),                      // 529
		message("claude-sonnet-4-5", strings.Repeat("x", 3000), 1000, false), // 413
		message("claude-sonnet-4-5", "hi", 1000, true),                       // 529
		message("claude-sonnet-4-5", "hi", 1000, true),
	} {
		resp, _, err := h.post(body)
		if err != nil {
			t.Fatalf("%v", err)
		}
		codes = append(codes, resp.StatusCode)
	}
	if got, want := itoaAll(codes), "200 529 413 529 200"; got != want {
		t.Errorf("answers %s, want %s", got, want)
	}
	output, _ := h.used(anthropic.Scope(key, "claude-sonnet-4-5"), anthropic.OutputTokens)
	var out int64
	for _, a := range sim.Arrivals() {
		out += a.Output
	}
	if output < out || output > out+500 { // up to 500 more for a rounded announcement
		t.Errorf("tollgate counts %d output tokens, the upstream %d: refused answers must give max_tokens back", output, out)
	}
}

func itoaAll(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = itoa(n)
	}
	return strings.Join(s, " ")
}

// TestTollgateRefuses: up to a limit given (less Transit's refill, see
// enforced) requests go; past it, the Transport refuses with an error
// matching tollgate.ErrQuotaExhausted before sending; max_tokens is given
// back as the answer's usage tells.
func TestTollgateRefuses(t *testing.T) {
	s := &stub{status: 200, body: `{"type":"message","usage":{"input_tokens":3,"output_tokens":40}}`}
	h := stubHarness(t, s, nil, anthropic.Options{Limits: anthropic.Limits{RPM: 50, ITPM: 30000, OTPM: 1000}, ReservePercent: -1, Tollgate: refuse})
	scope := anthropic.Scope(key, "claude-sonnet-4-5")
	for range 2 {
		if resp, _, err := h.post(message("claude-sonnet-4-5", "hi", 900, false)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	used, otpm := h.used(scope, anthropic.OutputTokens)
	if used != 80 || otpm != enforced(1000) {
		t.Fatalf("two answers of 40 output tokens count %d of %d, want 80 of %d", used, otpm, enforced(1000))
	}
	if resp, _, err := h.post(message("claude-sonnet-4-5", "hi", int(otpm-used), false)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("what is left of the OTPM: %v %v", resp, err)
	}
	n := s.count()
	_, _, err := h.post(message("claude-sonnet-4-5", "hi", 900, false))
	var qe *tollgate.QuotaError
	if !errors.Is(err, tollgate.ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Cause != tollgate.NoRoom || qe.Bucket != anthropic.OutputTokens {
		t.Errorf("over the OTPM: %v, want tollgate's refusal of output tokens", err)
	}
	if s.count() != n {
		t.Errorf("a refused request reached the upstream")
	}
}

// TestBadBodies: a body that cannot be counted fails before anything is
// sent, its body closed.
func TestBadBodies(t *testing.T) {
	sim := anthsim.New(anthsim.Config{})
	h := newHarness(t, sim, nil, anthropic.Options{MaxBody: 100})
	for _, body := range []string{`not json`, `[]`, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("x", 200) + `"}]}`} {
		c := &closeCounter{Reader: strings.NewReader(body)}
		req, _ := http.NewRequest("POST", h.url+"/v1/messages", c)
		req.Header.Set("X-Api-Key", key)
		_, err := h.tr.RoundTrip(req)
		if !errors.Is(err, anthropic.ErrBody) || c.closed != 1 {
			t.Errorf("%.20s: %v, body closed %d times; want ErrBody, closed once", body, err, c.closed)
		}
	}
	if n := len(sim.Arrivals()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestStreamReachesTheCallerWhole: the caller reads the stream's events as
// the upstream sent them.
func TestStreamReachesTheCallerWhole(t *testing.T) {
	sim := anthsim.New(anthsim.Config{})
	h := newHarness(t, sim, nil, anthropic.Options{Limits: anthropic.Limits{RPM: 50, ITPM: 30000, OTPM: 8000}})
	req, _ := http.NewRequest("POST", h.url+"/v1/messages", strings.NewReader(message("claude-sonnet-4-5", "hi", 100, true)))
	req.Header.Set("X-Api-Key", key)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
	}
	if len(events) < 6 || events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Errorf("events %v", events)
	}
}

func TestNewTransportRefusesWhatCannotWork(t *testing.T) {
	for _, o := range []anthropic.Options{
		{Limits: anthropic.Limits{RPM: -1}},
		{Classes: map[string]anthropic.Limits{"": {}}},
		{Classes: map[string]anthropic.Limits{"claude-opus-4": {OTPM: -5}}},
		{Counting: anthropic.Counting{BytesPerToken: -1}},
		{Minute: -time.Second},
		{MaxBody: -1},
		{ReservePercent: 100},
		{Tollgate: tollgate.Config{Base: http.DefaultTransport}},
	} {
		if tr, err := anthropic.NewTransport(nil, &o); err == nil || !strings.HasPrefix(err.Error(), "anthropic: ") {
			if tr != nil {
				tr.Close()
			}
			t.Errorf("NewTransport(%+v): %v, want an error", o, err)
		}
	}
}

// TestLimitsPastTheEngine: an organization whose ITPM is larger than a
// token bucket of a minute's the engine holds (quota.MaxRefillSpan over a
// minute in µs), given or learned from the headers, keeps sending:
// tollgate's bucket holds at most that at once, refilled at the limit
// (less the 5% reserve).
func TestLimitsPastTheEngine(t *testing.T) {
	reset := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	header := map[string]string{}
	for name, limit := range map[string]string{"Requests": "4000", "Input-Tokens": "100000000", "Output-Tokens": "400000"} {
		header["Anthropic-Ratelimit-"+name+"-Limit"] = limit
		header["Anthropic-Ratelimit-"+name+"-Remaining"] = limit
		header["Anthropic-Ratelimit-"+name+"-Reset"] = reset
	}
	most := quota.MaxRefillSpan / time.Minute.Microseconds()
	for _, c := range []struct {
		name   string
		limits anthropic.Limits
		header map[string]string
		used   int64 // the first request of a class learning its limits counts what they announce spent: none
	}{{"learned", anthropic.Limits{}, header, 6}, {"given", anthropic.Limits{RPM: 4000, ITPM: 100_000_000, OTPM: 400_000}, nil, 9}} {
		t.Run(c.name, func(t *testing.T) {
			s := &stub{status: 200, header: c.header, body: `{"type":"message","usage":{"input_tokens":3,"output_tokens":2}}`}
			h := stubHarness(t, s, nil, anthropic.Options{Limits: c.limits, Tollgate: refuse})
			for i := range 3 {
				if resp, _, err := h.post(message("claude-sonnet-4-5", "hi", 10, false)); err != nil || resp.StatusCode != 200 {
					t.Fatalf("request %d: %v %v", i, resp, err)
				}
			}
			u, err := h.tr.Usage(t.Context(), anthropic.Scope(key, "claude-sonnet-4-5"), anthropic.InputTokens)
			if err != nil {
				t.Fatal(err)
			}
			if lim := u[0].Limit; lim.Units > most || lim.Units < most*9/10 || lim.Refill != 95_000_000 || u[0].Used != c.used {
				t.Errorf("the ITPM enforced: %v, %d used; want %d used of at most %d (and not 10%% less) refilled at 95000000 a minute", lim, u[0].Used, c.used, most)
			}
		})
	}
}
