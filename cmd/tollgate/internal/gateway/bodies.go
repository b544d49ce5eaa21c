package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/providers/shopify"
)

// The bodies a provider reads whole to count (OpenAI, Anthropic, Gemini)
// are read by the gateway first, within two bounds: the bytes buffered at
// once for the whole gateway and for each caller. The gateway reads the
// model they name, and refuses one its upstream does not serve: each
// model is a scope of its own in Redis.

// maxNewModels bounds the models each caller may be the first to ask an
// upstream without a "models" option for, in a day: each model is a
// scope of its own in Redis, about nine keys kept two days. A model some
// caller already asked for is served to all.
const maxNewModels = 64

// models are the models an upstream serves: those its options list, or
// any, each caller bringing at most maxNewModels new ones a day.
type models struct {
	listed []string // nil: any

	mu    sync.Mutex
	seen  map[string]bool // the models served since since
	added map[string]int  // by caller: how many of them it brought
	since time.Time
}

// admit reports whether an upstream serves a caller a model ("" is no
// model: a request that spends the pool alone).
func (m *models) admit(caller, model string, now time.Time) bool {
	if model == "" {
		return true
	}
	if m.listed != nil {
		return slices.Contains(m.listed, model)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil || now.Sub(m.since) > 24*time.Hour {
		m.seen, m.added, m.since = map[string]bool{}, map[string]int{}, now
	}
	if m.seen[model] {
		return true
	}
	if m.added[caller] >= maxNewModels {
		return false
	}
	m.seen[model] = true
	m.added[caller]++
	return true
}

// counted reports whether an upstream's provider reads a request's body
// whole to count it, and returns the model its path names, if any.
func (u *upstream) counted(method, path string) (bool, string) {
	if method != http.MethodPost || u.maxBody == 0 {
		return false, ""
	}
	switch u.cfg.Provider {
	case "gemini":
		i := strings.LastIndex(path, "/models/")
		if i < 0 {
			return false, ""
		}
		model, _, ok := strings.Cut(path[i+len("/models/"):], ":")
		return ok, model
	case "openai":
		p := strings.TrimRight(path, "/")
		for _, s := range []string{"/completions", "/responses", "/embeddings"} {
			if strings.HasSuffix(p, s) {
				if i := strings.Index(p, "/deployments/"); i >= 0 {
					name, _, _ := strings.Cut(p[i+len("/deployments/"):], "/")
					return true, name
				}
				return true, ""
			}
		}
	case "anthropic":
		p := strings.TrimRight(path, "/")
		return strings.HasSuffix(p, "/messages") || strings.HasSuffix(p, "/messages/count_tokens"), ""
	case "shopify":
		return strings.HasSuffix(path, "/graphql.json"), ""
	}
	return false, ""
}

// modelOf returns the "model" of a JSON body; "" when it names none, or
// is not JSON (the provider refuses it).
func modelOf(body []byte) string {
	var v struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.Model
}

// bodyOptions are the options of the providers that read a body whole to
// count it: how large it may be, and the models served.
type bodyOptions struct {
	MaxBody int64    `json:"max_body"`
	Models  []string `json:"models"`
}

// bodies returns an upstream's max_body (0 for a provider that counts no
// body) and the models it serves.
func bodies(u *Upstream) (int64, *models, error) {
	var def int64
	switch u.Provider {
	case "openai":
		def = openai.DefaultMaxBody
	case "anthropic":
		def = anthropic.DefaultMaxBody
	case "gemini":
		def = gemini.DefaultMaxBody
	case "shopify":
		def = shopify.DefaultMaxBody
	default:
		return 0, nil, nil
	}
	var o bodyOptions
	if len(bytes.TrimSpace(u.Options)) > 0 {
		// The provider's own decoding refuses unknown options.
		if err := json.Unmarshal(u.Options, &o); err != nil {
			return 0, nil, fmt.Errorf("options: %s", oneLine(err.Error()))
		}
	}
	m := &models{}
	if o.Models != nil {
		m.listed = []string{}
		for _, name := range o.Models {
			if strings.TrimSpace(name) == "" {
				return 0, nil, errors.New("option models has an empty name")
			}
			m.listed = append(m.listed, name)
		}
	}
	if o.MaxBody > 0 {
		def = o.MaxBody
	}
	return def, m, nil
}

// budget bounds the bytes of request bodies buffered at once, for the
// whole gateway and for each caller.
type budget struct {
	total, perCaller int64

	mu     sync.Mutex
	all    int64
	caller map[string]int64
}

// Why a body is not buffered.
var (
	errBudgetAll    = errors.New("the gateway buffers as many request bytes as it may")
	errBudgetCaller = errors.New("this caller has as many request bytes buffered as it may")
	errTooLarge     = errors.New("the body is larger than the upstream's max_body")
)

// take reserves n bytes for a caller, or fails with errBudgetAll or
// errBudgetCaller.
func (b *budget) take(caller string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.caller[caller]+n > b.perCaller {
		return errBudgetCaller
	}
	if b.all+n > b.total {
		return errBudgetAll
	}
	b.all += n
	b.caller[caller] += n
	return nil
}

// give returns n bytes a caller took.
func (b *budget) give(caller string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all -= n
	if b.caller[caller] -= n; b.caller[caller] <= 0 {
		delete(b.caller, caller)
	}
}

// bufferStep is how much more a body of unknown length reserves each
// time it outgrows what it holds.
const bufferStep = 64 << 10

// buffer reads a request's body whole, up to limit bytes, reserving its
// bytes from the budget as it goes (all of them at once when the
// request says its length). It returns the body and the bytes reserved,
// to give back when the request ends, also on error.
func (b *budget) buffer(caller string, body io.Reader, length, limit int64) ([]byte, int64, error) {
	if length > limit {
		return nil, 0, errTooLarge
	}
	var held int64
	if length >= 0 {
		if err := b.take(caller, length); err != nil {
			return nil, 0, err
		}
		held = length
	}
	var buf bytes.Buffer
	if length > 0 {
		buf.Grow(int(length))
	}
	chunk := make([]byte, 32<<10)
	for {
		n, err := body.Read(chunk)
		if n > 0 {
			if int64(buf.Len()+n) > limit {
				return nil, held, errTooLarge
			}
			for int64(buf.Len()+n) > held {
				if err := b.take(caller, bufferStep); err != nil {
					return nil, held, err
				}
				held += bufferStep
			}
			buf.Write(chunk[:n])
		}
		if err == io.EOF {
			return buf.Bytes(), held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}
