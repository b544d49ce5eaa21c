// Package anthsim simulates Anthropic's Messages API (POST /v1/messages)
// in process, for tests and demos. It is the upstream truth: it meters
// every organization's requests, input tokens and output tokens per minute
// per model class with token buckets, as Anthropic's rate limits page
// documents them (https://docs.anthropic.com/en/api/rate-limits), and
// answers as the API does: the anthropic-ratelimit-* headers on every
// metered response, 429 rate_limit_error with retry-after past a limit, an
// occasional 529 overloaded_error when asked, 413 request_too_large for a
// body over the size limit, and usage in every answer, JSON or streamed.
// A test can then check that a client in front of it was never refused,
// and how deep it drew each bucket.
//
// The organization is the x-api-key (hashed). Answers are synthetic but
// deterministic: the same request gets the same text and usage. Time may
// run faster: with Config.Minute of 4s, a bucket refills its capacity in
// four seconds.
package anthsim

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Default limits of a class whose limits the Config does not give: the
// first usage tier's for Claude Sonnet 4.x on the rate limits page.
const (
	DefaultRPM  = 50
	DefaultITPM = 30000
	DefaultOTPM = 8000
)

// DefaultMaxBody is the largest request body answered: "Request size
// limits ... Messages API: 32 MB" (errors page,
// https://docs.anthropic.com/en/api/errors); larger gets 413
// request_too_large.
const DefaultMaxBody = 32 << 20

// Bucket names, in Stats and Arrival.
const (
	Requests     = "requests"
	InputTokens  = "input-tokens"
	OutputTokens = "output-tokens"
)

// Limits are one model class's limits per minute.
type Limits struct {
	RPM, ITPM, OTPM int64
	// CacheReads makes cache_read_input_tokens count toward ITPM, as for
	// the models the rate limits page marks with a dagger; for the
	// others, "only uncached input tokens count towards your ITPM rate
	// limits" (input_tokens and cache_creation_input_tokens).
	CacheReads bool
}

// Config configures a Server; zero values mean the defaults.
type Config struct {
	// Limits are every class's limits but those Classes names; zero
	// fields mean the defaults.
	Limits Limits
	// Classes gives some classes' limits, by class (see ClassOf).
	Classes map[string]Limits
	// Minute is how long a minute lasts; 0 means time.Minute.
	Minute time.Duration
	// OverloadEvery, when positive, answers every n-th request 529
	// overloaded_error before metering it.
	OverloadEvery int
	// MaxBody is the largest body answered; 0 means DefaultMaxBody.
	MaxBody int64
	// Latency, when positive, delays every admitted answer by this long.
	Latency time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Arrival is one request as the Server metered it.
type Arrival struct {
	// At is the Server's clock when the request arrived.
	At time.Time
	// Org is a hash of the key, never the key.
	Org string
	// Class and Model, e.g. "claude-sonnet-4" and "claude-sonnet-4-5".
	Class, Model string
	// Input is what the request counts in ITPM; Output in OTPM, its
	// max_tokens until it is answered, then its usage.output_tokens. Both
	// 0 when refused.
	Input, Output int64
	// Usage is the answer's usage: input, cache creation, cache read and
	// output tokens.
	Usage Usage
	// Status is the answer's status, e.g. 200, 429 or 529; Type the
	// error's type, e.g. "rate_limit_error".
	Status int
	Type   string
	// Stream reports a streamed answer.
	Stream bool
}

// Usage is an answer's usage, as the API reports it.
type Usage struct {
	InputTokens, CacheCreationInputTokens, CacheReadInputTokens, OutputTokens int64
}

// Stats are what a Server refused, and how deep each bucket was drawn.
type Stats struct {
	// Refused counts the 429s by the bucket that refused them.
	Refused map[string]int
	// Overloaded counts the 529s.
	Overloaded int
	// MaxUse is, by class and bucket, the most a bucket was ever below
	// its capacity, e.g. 29500 of an ITPM of 30000.
	MaxUse map[string]map[string]int64
}

// Server is the simulated API, an http.Handler. It is safe for concurrent
// use.
type Server struct {
	cfg    Config
	minute time.Duration
	now    func() time.Time

	mu       sync.Mutex
	meters   map[meterKey]*meter
	caches   map[string]bool // by org and prefix hash: prompt caches written
	arrivals []Arrival
	stats    Stats
	served   int64
}

// New returns a Server configured by cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, minute: cfg.Minute, now: cfg.Now, meters: map[meterKey]*meter{}, caches: map[string]bool{},
		stats: Stats{Refused: map[string]int{}, MaxUse: map[string]map[string]int64{}}}
	if s.minute <= 0 {
		s.minute = time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.MaxBody <= 0 {
		s.cfg.MaxBody = DefaultMaxBody
	}
	return s
}

// Minute is how long the Server's minute lasts.
func (s *Server) Minute() time.Duration { return s.minute }

// Limits returns the limits of a class.
func (s *Server) Limits(class string) Limits {
	l, ok := s.cfg.Classes[class]
	if !ok {
		l = s.cfg.Limits
	}
	if l.RPM <= 0 {
		l.RPM = DefaultRPM
	}
	if l.ITPM <= 0 {
		l.ITPM = DefaultITPM
	}
	if l.OTPM <= 0 {
		l.OTPM = DefaultOTPM
	}
	return l
}

// Arrivals returns the requests so far, in arrival order.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.arrivals)
}

// Stats returns a copy of the Server's counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Refused: map[string]int{}, Overloaded: s.stats.Overloaded, MaxUse: map[string]map[string]int64{}}
	for b, n := range s.stats.Refused {
		out.Refused[b] = n
	}
	for c, m := range s.stats.MaxUse {
		out.MaxUse[c] = map[string]int64{}
		for b, n := range m {
			out.MaxUse[c][b] = n
		}
	}
	return out
}

// ClassOf returns the class whose limits a model spends. "Rate limits
// are applied separately for each model" and some are shared by a family
// (the rate limits page: the Opus 4.x limit "applies to the combined
// traffic" of the Opus 4 models, and likewise Sonnet 4.x): a current
// model "claude-<family>-<major>-..." spends "claude-<family>-<major>";
// an older one ("claude-3-5-haiku-20241022") its name without the
// trailing date (or "-latest").
func ClassOf(model string) string {
	parts := strings.Split(model, "-")
	if len(parts) >= 3 && parts[0] == "claude" && !isDigits(parts[1]) && isDigits(parts[2]) {
		return strings.Join(parts[:3], "-")
	}
	if n := len(parts); n > 1 && (len(parts[n-1]) == 8 && isDigits(parts[n-1]) || parts[n-1] == "latest") {
		return strings.Join(parts[:n-1], "-")
	}
	return model
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// meterKey names one class's buckets in one organization.
type meterKey struct{ org, class string }

// bucket is a token bucket: "your capacity is continuously replenished up
// to your maximum limit, rather than being reset at fixed intervals"
// (rate limits page). level is what it holds at instant at.
type bucket struct {
	capacity int64
	level    float64
	at       time.Time
}

// refill brings the bucket to now, at capacity per minute.
func (b *bucket) refill(now time.Time, minute time.Duration) {
	if now.After(b.at) {
		b.level = math.Min(float64(b.capacity), b.level+float64(b.capacity)*float64(now.Sub(b.at))/float64(minute))
		b.at = now
	}
}

// wait is how long until n units fit; 0 when they fit now.
func (b *bucket) wait(n int64, minute time.Duration) time.Duration {
	short := float64(n) - b.level
	if short <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(short / float64(b.capacity) * float64(minute)))
}

// full is when the bucket is full again.
func (b *bucket) full(minute time.Duration) time.Time {
	return b.at.Add(time.Duration(math.Ceil((float64(b.capacity) - b.level) / float64(b.capacity) * float64(minute))))
}

// meter is one class's buckets in one organization.
type meter struct{ requests, input, output *bucket }

// orgOf names a request's organization: a hash of its x-api-key.
func orgOf(r *http.Request) string {
	sum := sha256.Sum256([]byte(r.Header.Get("X-Api-Key")))
	return "org-" + hex.EncodeToString(sum[:6])
}

// ServeHTTP answers a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || strings.TrimRight(r.URL.Path, "/") != "/v1/messages" {
		writeError(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	s.mu.Lock()
	s.served++
	n := s.served
	s.mu.Unlock()
	body, tooLarge, err := readBody(r, s.cfg.MaxBody)
	switch {
	case tooLarge:
		s.record(Arrival{At: s.now(), Org: orgOf(r), Status: http.StatusRequestEntityTooLarge, Type: "request_too_large"})
		writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "could not read the body")
		return
	}
	req, err := readRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	org := orgOf(r)
	if s.cfg.OverloadEvery > 0 && n%int64(s.cfg.OverloadEvery) == 0 {
		s.mu.Lock()
		s.stats.Overloaded++
		s.arrivals = append(s.arrivals, Arrival{At: s.now(), Org: org, Class: ClassOf(req.model), Model: req.model,
			Status: 529, Type: "overloaded_error", Stream: req.stream})
		s.mu.Unlock()
		writeError(w, 529, "overloaded_error", "Overloaded")
		return
	}
	a := s.admit(w.Header(), org, req)
	if a.refusal != nil {
		a.refusal(w)
		return
	}
	if s.cfg.Latency > 0 {
		t := time.NewTimer(s.cfg.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if req.stream {
		s.stream(w, req, a)
	} else {
		s.answer(w, req, a)
	}
}

// admission is what admit decided: a refusal to write, or the usage of
// the admitted request and the arrival that records it.
type admission struct {
	refusal func(http.ResponseWriter)
	usage   Usage
	arrival int
	key     meterKey
	id      int64
}

// admit meters a request and writes the anthropic-ratelimit-* headers.
func (s *Server) admit(h http.Header, org string, req request) admission {
	class := ClassOf(req.model)
	lim := s.Limits(class)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	k := meterKey{org, class}
	m := s.meters[k]
	if m == nil {
		m = &meter{
			requests: &bucket{capacity: lim.RPM, level: float64(lim.RPM), at: now},
			input:    &bucket{capacity: lim.ITPM, level: float64(lim.ITPM), at: now},
			output:   &bucket{capacity: lim.OTPM, level: float64(lim.OTPM), at: now},
		}
		s.meters[k] = m
	}
	for _, b := range []*bucket{m.requests, m.input, m.output} {
		b.refill(now, s.minute)
	}
	u, writes := s.usageOf(org, req)
	// ITPM counts input_tokens and cache_creation_input_tokens, and
	// cache_read_input_tokens only for the classes marked so (rate
	// limits page, "Cache-aware ITPM").
	input := u.InputTokens + u.CacheCreationInputTokens
	if lim.CacheReads {
		input += u.CacheReadInputTokens
	}
	// "OTPM rate limits are estimated based on max_tokens at the
	// beginning of each request and adjusted at the end of the request to
	// reflect the actual number of output tokens used" (rate limits page).
	output := req.maxTokens
	a := Arrival{At: now, Org: org, Class: class, Model: req.model, Status: http.StatusOK, Stream: req.stream}
	out := admission{key: k, id: s.served}
	checks := []struct {
		name  string
		b     *bucket
		units int64
		what  string
	}{
		{Requests, m.requests, 1, "requests per minute"},
		{InputTokens, m.input, input, "input tokens per minute"},
		{OutputTokens, m.output, output, "output tokens per minute"},
	}
	for _, c := range checks {
		if d := c.b.wait(c.units, s.minute); d > 0 {
			s.stats.Refused[c.name]++
			a.Status, a.Type = http.StatusTooManyRequests, "rate_limit_error"
			msg := "This request would exceed the rate limit for your organization of " + itoa(c.b.capacity) + " " + c.what + " (" + class + "). Please reduce the prompt length or the maximum tokens requested, or try again later."
			out.refusal = func(w http.ResponseWriter) {
				// retry-after: "The number of seconds to wait until you can
				// retry the request. Earlier retries will fail." (rate
				// limits page): whole seconds, rounded up.
				w.Header().Set("Retry-After", itoa(int64((d+time.Second-1)/time.Second)))
				writeError(w, http.StatusTooManyRequests, "rate_limit_error", msg)
			}
			break
		}
	}
	if out.refusal == nil {
		for _, c := range checks {
			c.b.level -= float64(c.units)
			use := s.stats.MaxUse[class]
			if use == nil {
				use = map[string]int64{}
				s.stats.MaxUse[class] = use
			}
			use[c.name] = max(use[c.name], int64(math.Ceil(float64(c.b.capacity)-c.b.level)))
		}
		for _, key := range writes {
			s.caches[key] = true
		}
		out.usage = u
		a.Input, a.Output, a.Usage = input, output, u
	}
	out.arrival = len(s.arrivals)
	s.arrivals = append(s.arrivals, a)
	s.announce(h, m)
	return out
}

// settle gives back the output tokens a request was charged beyond what it
// used, once answered.
func (s *Server) settle(a admission, u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.meters[a.key]
	m.output.refill(s.now(), s.minute)
	charged := s.arrivals[a.arrival].Output
	m.output.level = math.Min(float64(m.output.capacity), m.output.level+float64(charged-u.OutputTokens))
	s.arrivals[a.arrival].Output = u.OutputTokens
	s.arrivals[a.arrival].Usage = u
}

// announce writes the anthropic-ratelimit-* headers (rate limits page,
// "Response headers"): each limit, what remains of it ("rounded to the
// nearest thousand" for tokens), and "the time when the rate limit will
// be fully replenished, provided in RFC 3339 format"; tokens-* tell "the
// most restrictive limit currently in effect" of input and output.
func (s *Server) announce(h http.Header, m *meter) {
	set := func(name string, b *bucket, round bool) {
		rem := int64(math.Floor(b.level))
		if round {
			rem = (rem + 500) / 1000 * 1000
		}
		h.Set("Anthropic-Ratelimit-"+name+"-Limit", itoa(b.capacity))
		h.Set("Anthropic-Ratelimit-"+name+"-Remaining", itoa(rem))
		h.Set("Anthropic-Ratelimit-"+name+"-Reset", s.stamp(b.full(s.minute)))
	}
	set("Requests", m.requests, false)
	set("Input-Tokens", m.input, true)
	set("Output-Tokens", m.output, true)
	tight := m.input
	if m.output.level/float64(m.output.capacity) < m.input.level/float64(m.input.capacity) {
		tight = m.output
	}
	set("Tokens", tight, true)
}

// stamp writes an instant in RFC 3339: whole seconds, rounded up, as the
// API writes them on the real clock; milliseconds when minutes run
// faster, where a second would be a large part of one.
func (s *Server) stamp(t time.Time) string {
	if s.minute >= time.Minute {
		return t.UTC().Add(time.Second - 1).Truncate(time.Second).Format(time.RFC3339)
	}
	return t.UTC().Add(time.Millisecond - 1).Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
}

// record appends an arrival that meters nothing.
func (s *Server) record(a Arrival) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals = append(s.arrivals, a)
}
