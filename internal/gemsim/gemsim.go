// Package gemsim simulates Google's Gemini API in process, for tests and
// demos. It is the upstream truth: it meters every project's requests per
// minute (RPM), input tokens per minute (TPM) and requests per day (RPD)
// per model, as Google documents them
// (https://ai.google.dev/gemini-api/docs/rate-limits), and refuses a
// request over any of them with 429 RESOURCE_EXHAUSTED, a
// google.rpc.QuotaFailure naming the limit and a google.rpc.RetryInfo
// telling when it has room again, as the API does
// (https://ai.google.dev/gemini-api/docs/troubleshooting). A test can
// then check that a client in front of it never spent more than a limit
// allowed.
//
// It serves POST /v1beta/models/{model}:generateContent,
// :streamGenerateContent (server-sent events with ?alt=sse), :embedContent,
// :batchEmbedContents (a batch of n counts n requests) and :countTokens
// (free). A project is its API key (X-Goog-Api-Key or key=); every model
// has its own limits there. Every limit is a sliding window: a minute, and
// a day of 1,440 minutes (the real API's day is the Pacific calendar
// day; a simulation whose minutes last a second has none). Answers are
// synthetic and deterministic, and tell usageMetadata.promptTokenCount.
package gemsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Limits are one model's limits in a project; 0 is not enforced.
type Limits struct {
	RPM, TPM, RPD int64
}

// Config configures a Server.
type Config struct {
	// Models gives each model's limits; a model not named is answered 404
	// NOT_FOUND.
	Models map[string]Limits
	// Minute is how long a minute lasts, and a day 1,440 of them; 0 means
	// time.Minute.
	Minute time.Duration
	// FileTokens is what a part given by URI (fileData) counts; 0 means
	// 1,000.
	FileTokens int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Arrival is one request to a model as the Server metered it.
type Arrival struct {
	// At is the Server's clock when the request arrived.
	At time.Time
	// Project is a hash of the key.
	Project string
	// Model and Method, e.g. "gemini-2.5-flash" and "generateContent".
	Model, Method string
	// Requests is what the request counts in RPM and RPD, Tokens in TPM:
	// 0 when refused.
	Requests, Tokens int64
	// Status is the answer's status; Limit the quotaId of a refusal.
	Status int
	Limit  string
}

// Server is the simulated API, an http.Handler, safe for concurrent use.
type Server struct {
	cfg    Config
	minute time.Duration
	now    func() time.Time

	mu       sync.Mutex
	logs     map[string][]entry // by project and model
	arrivals []Arrival
}

// entry is a request the Server admitted.
type entry struct {
	at               time.Time
	requests, tokens int64
}

// New returns a Server configured by cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, minute: cfg.Minute, now: cfg.Now, logs: map[string][]entry{}}
	if s.minute <= 0 {
		s.minute = time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.FileTokens <= 0 {
		s.cfg.FileTokens = 1000
	}
	return s
}

// Arrivals returns the requests to models so far, in arrival order.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// The quotaIds and metrics of the limits, as the API names them.
const (
	QuotaRPM = "GenerateRequestsPerMinutePerProjectPerModel"
	QuotaRPD = "GenerateRequestsPerDayPerProjectPerModel"
	QuotaTPM = "GenerateContentInputTokensPerModelPerMinute"
)

// ServeHTTP answers a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.LastIndex(r.URL.Path, "/models/")
	if r.Method != http.MethodPost || i < 0 {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such method", nil)
		return
	}
	model, method, _ := strings.Cut(r.URL.Path[i+len("/models/"):], ":")
	key := r.Header.Get("X-Goog-Api-Key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	if key == "" {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers. Please use API Key.", nil)
		return
	}
	lim, ok := s.cfg.Models[model]
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "models/"+model+" is not found", nil)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.", nil)
		return
	}
	var contents []any
	requests := int64(1)
	switch method {
	case "generateContent", "streamGenerateContent", "countTokens":
		if g, ok := body["generateContentRequest"].(map[string]any); ok && method == "countTokens" {
			body = g
		}
		contents, _ = body["contents"].([]any)
		if si, ok := body["systemInstruction"]; ok {
			contents = append(contents, si)
		}
	case "embedContent":
		contents = []any{body["content"]}
	case "batchEmbedContents":
		reqs, _ := body["requests"].([]any)
		requests = int64(len(reqs))
		for _, e := range reqs {
			if o, ok := e.(map[string]any); ok {
				contents = append(contents, o["content"])
			}
		}
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such method "+method, nil)
		return
	}
	tokens := s.count(contents)
	if method == "countTokens" {
		writeJSON(w, map[string]any{"totalTokens": tokens})
		return
	}
	project := hash(key)
	if refused, delay := s.admit(project, model, method, lim, requests, tokens); refused != "" {
		writeError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"You exceeded your current quota, please check your plan and billing details.",
			[]any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
					"quotaMetric":     "generativelanguage.googleapis.com/" + metricOf(refused),
					"quotaId":         refused,
					"quotaDimensions": map[string]any{"location": "global", "model": model},
					"quotaValue":      fmt.Sprint(valueOf(refused, lim)),
				}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]any{
					"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%.3fs", delay.Seconds())},
			})
		return
	}
	usage := map[string]any{"promptTokenCount": tokens, "candidatesTokenCount": 5, "totalTokenCount": tokens + 5}
	switch method {
	case "generateContent":
		writeJSON(w, answer(model, "A short answer.", usage))
	case "streamGenerateContent":
		w.Header().Set("Content-Type", "text/event-stream")
		for i, part := range []string{"A ", "short ", "answer."} {
			chunk := answer(model, part, usage)
			if i < 2 {
				delete(chunk["candidates"].([]any)[0].(map[string]any), "finishReason")
			}
			b, _ := json.Marshal(chunk)
			fmt.Fprintf(w, "data: %s\r\n\r\n", b)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	case "embedContent":
		writeJSON(w, map[string]any{"embedding": map[string]any{"values": []float64{0.1, 0.2, 0.3}}})
	case "batchEmbedContents":
		es := make([]any, requests)
		for i := range es {
			es[i] = map[string]any{"values": []float64{0.1, 0.2, 0.3}}
		}
		writeJSON(w, map[string]any{"embeddings": es})
	}
}

// answer is a generateContent answer of text.
func answer(model, text string, usage map[string]any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
			"finishReason": "STOP", "index": 0}},
		"usageMetadata": usage,
		"modelVersion":  model,
	}
}

// admit meters a request: the quotaId of the limit it is over and when
// that limit has room again, or "" once it is counted.
func (s *Server) admit(project, model, method string, lim Limits, requests, tokens int64) (string, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	k := project + "/" + model
	day := 1440 * s.minute
	log := s.logs[k]
	for len(log) > 0 && !log[0].at.After(now.Add(-day)) {
		log = log[1:]
	}
	s.logs[k] = log
	a := Arrival{At: now, Project: project, Model: model, Method: method}
	var rpd, rpm, tpm int64
	for _, e := range log {
		rpd += e.requests
		if e.at.After(now.Add(-s.minute)) {
			rpm += e.requests
			tpm += e.tokens
		}
	}
	var refused string
	var window time.Duration
	switch {
	case lim.RPD > 0 && rpd+requests > lim.RPD:
		refused, window = QuotaRPD, day
	case lim.RPM > 0 && rpm+requests > lim.RPM:
		refused, window = QuotaRPM, s.minute
	case lim.TPM > 0 && tpm+tokens > lim.TPM:
		refused, window = QuotaTPM, s.minute
	}
	if refused != "" {
		a.Status, a.Limit = http.StatusTooManyRequests, refused
		s.arrivals = append(s.arrivals, a)
		delay := window
		for _, e := range log {
			if e.at.After(now.Add(-window)) {
				delay = e.at.Add(window).Sub(now) // the oldest in the window leaves then
				break
			}
		}
		return refused, delay
	}
	s.logs[k] = append(log, entry{at: now, requests: requests, tokens: tokens})
	a.Status, a.Requests, a.Tokens = http.StatusOK, requests, tokens
	s.arrivals = append(s.arrivals, a)
	return "", 0
}

func metricOf(quotaID string) string {
	switch quotaID {
	case QuotaTPM:
		return "generate_content_input_token_count"
	default:
		return "generate_content_requests"
	}
}

func valueOf(quotaID string, l Limits) int64 {
	switch quotaID {
	case QuotaRPD:
		return l.RPD
	case QuotaRPM:
		return l.RPM
	}
	return l.TPM
}

// count counts contents' input tokens: a token per four ASCII characters
// of each text part, rounded up, and one per other character; 258 per
// inline image, and Config.FileTokens per part by URI.
func (s *Server) count(contents []any) int64 {
	var n int64
	for _, c := range contents {
		cm, _ := c.(map[string]any)
		parts, _ := cm["parts"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			if t, ok := pm["text"].(string); ok {
				var ascii, wide int64
				for _, r := range t {
					if r < 0x80 {
						ascii++
					} else {
						wide++
					}
				}
				n += (ascii+3)/4 + wide
			}
			if _, ok := pm["inlineData"]; ok {
				n += 258
			}
			if _, ok := pm["fileData"]; ok {
				n += s.cfg.FileTokens
			}
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	json.NewEncoder(w).Encode(v)
}

// writeError writes a google.rpc.Status.
func writeError(w http.ResponseWriter, code int, status, message string, details []any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	e := map[string]any{"code": code, "message": message, "status": status}
	if details != nil {
		e["details"] = details
	}
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

// hash names a key's project without showing it.
func hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
