// Package oaisim simulates an OpenAI-compatible API in process, for tests
// and demos. It is the upstream truth: it meters every pool's requests and
// tokens per model, per minute and (when given) per day, as OpenAI
// documents it (count.go), and answers as OpenAI does: the x-ratelimit-*
// headers on every response, 429 rate_limit_exceeded past a limit, 429
// insufficient_quota for a key without credits, and usage in every body,
// streamed or not. A test can then check that a client in front of it
// never spent more than a limit allowed.
//
// It serves POST .../chat/completions, .../responses, .../embeddings and
// .../completions under any prefix (OpenAI's /v1, Azure OpenAI's
// /openai/deployments/{name}, a gateway's), and GET .../models. Answers
// are synthetic but deterministic: the same request gets the same text and
// usage. Time may run faster: with Config.Minute of 3s, a minute's limits
// refill in three seconds.
package oaisim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Default limits of a model whose limits the Config does not give.
const (
	DefaultRPM = 500
	DefaultTPM = 30000
)

// Limits are one model's limits; 0 per minute means the default, 0 per
// day none.
type Limits struct {
	RPM, TPM, RPD, TPD int64
}

// Config configures a Server; zero values mean the defaults.
type Config struct {
	// Limits are every model's limits but those Models names.
	Limits Limits
	// Models gives some models' limits, by name (the body's model, or an
	// Azure deployment's name).
	Models map[string]Limits
	// Minute is how long a minute lasts, and a day 1440 of them; 0 means
	// time.Minute.
	Minute time.Duration
	// Broke lists API keys whose organization has no credits left: they
	// are answered 429 insufficient_quota, and nothing is metered.
	Broke []string
	// Silent leaves out the x-ratelimit-* headers, as vLLM does.
	Silent bool
	// CountUsage counts a request's tokens as it used them, as gateways
	// with token limits do, instead of at its arrival: a request is let in
	// while its prompt's estimate fits, and counts its usage's
	// total_tokens, at its arrival, once it is answered.
	CountUsage bool
	// Latency, when positive, delays every answer by this long after the
	// request is metered (or until its context is done).
	Latency time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server is the simulated API, an http.Handler. It is safe for concurrent
// use.
type Server struct {
	cfg    Config
	minute time.Duration
	broke  map[string]bool
	now    func() time.Time

	mu       sync.Mutex
	meters   map[meterKey]*meter
	arrivals []Arrival
	served   int64 // answers so far, for ids
}

// Arrival is one request to an API as the Server metered it.
type Arrival struct {
	// At is the Server's clock when the request arrived and was metered.
	At time.Time
	// Pool names the key and project charged: a hash, never the key.
	Pool string
	// Model is the model charged, e.g. "gpt-4o-mini".
	Model string
	// API is "chat.completions", "responses", "embeddings" or
	// "completions".
	API string
	// Tokens is what the request counts in TPM: at its arrival, or with
	// Config.CountUsage its usage once answered; 0 when refused.
	Tokens int64
	// Status is the answer's status, e.g. 200 or 429.
	Status int
	// Code is the error code of a refusal, e.g. "rate_limit_exceeded" or
	// "insufficient_quota"; "" for a success.
	Code string
	// Stream reports a streamed answer.
	Stream bool
}

// New returns a Server configured by cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, minute: cfg.Minute, now: cfg.Now, broke: map[string]bool{}, meters: map[meterKey]*meter{}}
	if s.minute <= 0 {
		s.minute = time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, k := range cfg.Broke {
		s.broke[k] = true
	}
	return s
}

// Minute is how long the Server's minute lasts.
func (s *Server) Minute() time.Duration { return s.minute }

// Limits returns the limits of a model.
func (s *Server) Limits(model string) Limits {
	l, ok := s.cfg.Models[model]
	if !ok {
		l = s.cfg.Limits
	}
	if l.RPM <= 0 {
		l.RPM = DefaultRPM
	}
	if l.TPM <= 0 {
		l.TPM = DefaultTPM
	}
	return l
}

// Arrivals returns the requests metered so far, in arrival order.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.arrivals)
}

// meterKey names one model's meter in one pool.
type meterKey struct{ pool, model string }

// entry is one request's units in a window, from its arrival.
type entry struct {
	at    time.Time
	units int64
}

// meter holds one pool's requests and tokens for one model, oldest first,
// as far back as its longest window.
type meter struct{ requests, tokens []*entry }

// used sums the units of entries within (now-w, now].
func used(entries []*entry, now time.Time, w time.Duration) (sum int64, newest time.Time) {
	for i := len(entries) - 1; i >= 0 && entries[i].at.After(now.Add(-w)); i-- {
		sum += entries[i].units
		if entries[i].at.After(newest) {
			newest = entries[i].at
		}
	}
	return sum, newest
}

// prune forgets the entries older than w.
func prune(entries []*entry, now time.Time, w time.Duration) []*entry {
	i := 0
	for i < len(entries) && !entries[i].at.After(now.Add(-w)) {
		i++
	}
	return entries[i:]
}

// poolOf names a request's pool: its key (OpenAI's Bearer, or Azure's
// api-key) and project, hashed.
func poolOf(r *http.Request) (pool, key string) {
	key = strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if key == "" {
		key = r.Header.Get("Api-Key")
	}
	sum := sha256.Sum256([]byte(key + "\x00" + r.Header.Get("OpenAI-Project")))
	return "pool-" + hex.EncodeToString(sum[:6]), key
}

// ServeHTTP answers a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimRight(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		s.listModels(w)
		return
	case r.Method != http.MethodPost || apiOf(path) == "":
		writeError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", "")
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the body", "invalid_request_error", "")
		return
	}
	req, err := readRequest(apiOf(path), body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "")
		return
	}
	if d := deploymentOf(path); d != "" {
		req.model = d
	}
	pool, key := poolOf(r)
	if s.broke[key] {
		s.record(Arrival{At: s.now(), Pool: pool, Model: req.model, API: string(req.api), Status: http.StatusTooManyRequests, Code: "insufficient_quota", Stream: req.stream})
		writeError(w, http.StatusTooManyRequests, "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.", "insufficient_quota", "insufficient_quota")
		return
	}
	a := s.admit(w.Header(), pool, req)
	if a.refusal != nil {
		a.refusal(w)
		return
	}
	if s.cfg.Latency > 0 {
		waitCtx(r.Context(), s.cfg.Latency)
	}
	u := s.answer(w, req, a.id)
	if s.cfg.CountUsage {
		s.settle(a, u.total())
	}
}

// deploymentOf returns the deployment an Azure OpenAI path names, or "".
func deploymentOf(path string) string {
	const seg = "/deployments/"
	i := strings.Index(path, seg)
	if i < 0 {
		return ""
	}
	name, _, _ := strings.Cut(path[i+len(seg):], "/")
	return name
}

// admission is what admit decided: a refusal to write, or the entry of
// the tokens counted and the arrival that records it.
type admission struct {
	refusal func(http.ResponseWriter)
	tokens  *entry
	arrival int // index in arrivals
	id      int64
}

// admit meters a request and writes the x-ratelimit-* headers.
func (s *Server) admit(h http.Header, pool string, req request) admission {
	lim := s.Limits(req.model)
	day := 24 * 60 * s.minute
	longest := s.minute
	if lim.RPD > 0 || lim.TPD > 0 {
		longest = day
	}
	cost := req.tokens()
	if s.cfg.CountUsage {
		cost = req.prompt // let in while the prompt fits; the usage counts once known
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.served++
	k := meterKey{pool, req.model}
	m := s.meters[k]
	if m == nil {
		m = &meter{}
		s.meters[k] = m
	}
	m.requests, m.tokens = prune(m.requests, now, longest), prune(m.tokens, now, longest)
	reqs, _ := used(m.requests, now, s.minute)
	toks, _ := used(m.tokens, now, s.minute)
	dayReqs, _ := used(m.requests, now, day)
	dayToks, _ := used(m.tokens, now, day)

	var refusal func(http.ResponseWriter)
	switch {
	case cost > lim.TPM:
		refusal = refuse(http.StatusTooManyRequests, "Request too large for "+req.model+" in organization org-sim on tokens per min (TPM): Limit "+itoa(lim.TPM)+", Requested "+itoa(cost)+". The input or output tokens must be reduced in order to run successfully.", "tokens", "rate_limit_exceeded")
	case reqs+1 > lim.RPM:
		refusal = s.rateLimited(req.model, "requests per min (RPM)", "requests", lim.RPM, reqs, 1, m.requests, now, s.minute)
	case toks+cost > lim.TPM:
		refusal = s.rateLimited(req.model, "tokens per min (TPM)", "tokens", lim.TPM, toks, cost, m.tokens, now, s.minute)
	case lim.RPD > 0 && dayReqs+1 > lim.RPD:
		refusal = s.rateLimited(req.model, "requests per day (RPD)", "requests", lim.RPD, dayReqs, 1, m.requests, now, day)
	case lim.TPD > 0 && dayToks+cost > lim.TPD:
		refusal = s.rateLimited(req.model, "tokens per day (TPD)", "tokens", lim.TPD, dayToks, cost, m.tokens, now, day)
	}
	a := Arrival{At: now, Pool: pool, Model: req.model, API: string(req.api), Stream: req.stream, Status: http.StatusOK}
	// "Note that unsuccessful requests contribute to your per-minute
	// limit" (rate limits guide): a refused request counts as a request.
	m.requests = append(m.requests, &entry{at: now, units: 1})
	out := admission{refusal: refusal, id: s.served}
	if refusal == nil {
		out.tokens = &entry{at: now, units: cost}
		m.tokens = append(m.tokens, out.tokens)
		a.Tokens = cost
	} else {
		a.Status, a.Code = http.StatusTooManyRequests, "rate_limit_exceeded"
	}
	out.arrival = len(s.arrivals)
	s.arrivals = append(s.arrivals, a)
	if !s.cfg.Silent {
		s.announce(h, "requests", lim.RPM, m.requests, now)
		s.announce(h, "tokens", lim.TPM, m.tokens, now)
	}
	return out
}

// announce writes one limit's x-ratelimit-* headers: the limit per
// minute, what remains of it, and how long until the window holds
// nothing, as a Go duration (rate limits guide: "The time until the rate
// limit ... resets to its initial state", e.g. "6m0s").
func (s *Server) announce(h http.Header, name string, limit int64, entries []*entry, now time.Time) {
	sum, newest := used(entries, now, s.minute)
	reset := time.Duration(0)
	if !newest.IsZero() {
		reset = newest.Add(s.minute).Sub(now)
	}
	h.Set("X-Ratelimit-Limit-"+name, itoa(limit))
	h.Set("X-Ratelimit-Remaining-"+name, itoa(max(limit-sum, 0)))
	h.Set("X-Ratelimit-Reset-"+name, reset.Round(time.Millisecond).String())
}

// rateLimited builds the 429 of a limit reached, with a Retry-After of
// when the request would fit.
func (s *Server) rateLimited(model, what, typ string, limit, used, cost int64, entries []*entry, now time.Time, w time.Duration) func(http.ResponseWriter) {
	// The request fits once enough of the window's oldest entries leave it.
	wait := time.Duration(0)
	excess := used + cost - limit
	for _, e := range entries {
		if !e.at.After(now.Add(-w)) {
			continue
		}
		excess -= e.units
		if excess <= 0 {
			wait = e.at.Add(w).Sub(now)
			break
		}
	}
	msg := "Rate limit reached for " + model + " in organization org-sim on " + what + ": Limit " + itoa(limit) + ", Used " + itoa(used) + ", Requested " + itoa(cost) + ". Please try again in " + wait.Round(time.Millisecond).String() + "."
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", itoa(int64((wait+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, msg, typ, "rate_limit_exceeded")
	}
}

// settle replaces what a request counts in TPM by its usage.
func (s *Server) settle(a admission, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.tokens.units = total
	s.arrivals[a.arrival].Tokens = total
}

// record appends an arrival that meters nothing.
func (s *Server) record(a Arrival) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals = append(s.arrivals, a)
}

// waitCtx sleeps d or until ctx is done.
func waitCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
