package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/provider"
	"github.com/tollgate/tollgate/quota"
)

// ErrNoLimits matches the error of a request for a model that has no
// limits: neither Options.Models nor Options.Limits nor FreeTier gives
// any. Nothing was sent: a request is never sent unmetered.
var ErrNoLimits = errors.New("gemini: no limits for the model")

// ErrCountTokens matches the error of a request with parts given by URI
// whose tokens the API's countTokens method could not count. Nothing was
// sent.
var ErrCountTokens = errors.New("gemini: countTokens failed")

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Base sends the requests that are admitted, and the countTokens calls
	// the Transport makes itself. nil means http.DefaultTransport.
	Base http.RoundTripper

	// Limits are every model's limits, but those Models names; zero means
	// FreeTier's, for the models it knows.
	Limits Limits
	// Models gives some models' limits, by model name ("gemini-2.5-flash"),
	// replacing Limits and FreeTier for them.
	Models map[string]Limits

	// Counting says how inline media are counted; the zero value means
	// the defaults.
	Counting Counting

	// ReservePercent is kept below every limit, rounded up; 0 means
	// DefaultReservePercent, a negative value none.
	ReservePercent float64
	// Minute, when set, is how long a minute lasts, for tests and demos
	// against a simulated server whose time runs faster; a day is then any
	// 1,440 of them, since a simulation has no Pacific midnight. 0 means
	// time.Minute, and the Pacific calendar day.
	Minute time.Duration
	// MaxBody bounds the request bodies read to count their tokens; 0
	// means DefaultMaxBody.
	MaxBody int64

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Local and LocalShare, the hooks and Logger. Its Scope, when
	// set, names the project of a request instead of a hash of its key
	// (e.g. tollgate.Scope("my-project") for several keys of one project),
	// and must not contain "/": the model is joined to it after a "/".
	// NewTransport fills in the rest: setting Base, Limiter, Costs,
	// Buckets or Upstream here is an error.
	Tollgate tollgate.Config
}

// Transport meters calls to the Gemini API: an http.RoundTripper that
// charges each request to its model's buckets in its project. It reads the
// body of each request to a model once, whole (up to Options.MaxBody),
// before charging it. Build one with NewTransport; it is safe for
// concurrent use. Close it when done.
//
// Beside RoundTrip, it has Usage and Pause, as tollgate.Transport has
// them, for a project (see Scope) and a model's RPM, RPD or TPM bucket
// (Pause: "" for all three; a scope without a model pauses its free
// requests); CloseIdleConnections, handed on to Options.Base; and Close,
// which also ends the Redis NewTransport ran in-process for want of a
// Redis client.
type Transport struct {
	controls                                // Usage, Pause, CloseIdleConnections, Close: the kit's
	models   map[string]*tollgate.Transport // by model, as Options.Models names them
	all      *tollgate.Transport            // Options.Limits; nil when zero
	defaults map[string]*tollgate.Transport // FreeTier's, when Options.Limits is zero
	free     *tollgate.Transport            // the free requests
	project  tollgate.ScopeFunc             // Options.Tollgate.Scope; nil: by key
	base     http.RoundTripper
	counting Counting
	maxBody  int64
	kit      *provider.Kit
}

// controls are the methods of the kit that a Transport shows its users:
// embedded under this name, they are its own, and no field shows.
type controls = provider.Controls

// NewTransport returns a ready http.RoundTripper for the Gemini API, from a
// Redis client shared by every process spending the same projects (nil
// runs an in-process Redis, for a single process) and options (nil for the
// defaults). It checks the whole configuration: an error here is one the
// first request would otherwise meet.
func NewTransport(rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	t := &Transport{models: map[string]*tollgate.Transport{}, defaults: map[string]*tollgate.Transport{},
		project: opts.Tollgate.Scope, base: opts.Base, counting: opts.Counting, maxBody: opts.sizes().Body(DefaultMaxBody)}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	cfg.Scope = provider.ScopeOf
	if t.kit, err = provider.Start("gemini", rdb); err != nil {
		return nil, err
	}
	t.controls = t.kit.Controls
	t.kit.Pick(t.forScope)
	build := func(l Limits) (*tollgate.Transport, error) {
		cfg.Buckets = opts.buckets(l)
		tr, err := t.kit.New(cfg)
		if err != nil {
			return nil, t.kit.Fail(err)
		}
		return tr, nil
	}
	if t.free, err = build(Limits{}); err != nil {
		return nil, err
	}
	for m, l := range opts.Models {
		if t.models[modelKey(m)], err = build(l); err != nil {
			return nil, err
		}
	}
	if !opts.Limits.zero() {
		if t.all, err = build(opts.Limits); err != nil {
			return nil, err
		}
	} else {
		for m, l := range freeTier {
			if t.defaults[m], err = build(l); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// modelKey is a model's name without the API's "models/" prefix.
func modelKey(m string) string { return strings.TrimPrefix(m, "models/") }

// sizes are the options that the kit checks and reads alike for every
// provider that may run on a scaled clock.
func (o *Options) sizes() *provider.Sizes {
	return &provider.Sizes{Minute: o.Minute, MaxBody: o.MaxBody, ReservePercent: o.ReservePercent}
}

// config checks the options and assembles the tollgate.Config they ask
// for, all but the scope, buckets and limiter.
func (o *Options) config() (tollgate.Config, error) {
	cfg := o.Tollgate
	owned := provider.Owned{Provider: "gemini", Upstream: "Gemini", Buckets: "Options.Limits and Options.Models", Sizes: o.sizes()}
	if err := owned.Check(cfg); err != nil {
		return cfg, err
	}
	c := o.Counting
	if c.ImageBytesPerTile < 0 || c.AudioBytesPerSecond < 0 || c.VideoBytesPerSecond < 0 {
		return cfg, fmt.Errorf("gemini: Options.Counting %+v: counts must not be negative", c)
	}
	for m, l := range o.Models {
		if modelKey(m) == "" || strings.Contains(modelKey(m), "/") {
			return cfg, fmt.Errorf("gemini: Options.Models has a model named %q; name models as the API does, e.g. \"gemini-2.5-flash\"", m)
		}
		if l.zero() { // no negative limit either: that one CheckLimits tells
			return cfg, fmt.Errorf("gemini: Options.Models[%q] sets no limit", m)
		}
	}
	if err := provider.CheckLimits("gemini", "Models", o.Models, o.Limits, Limits.check); err != nil {
		return cfg, err
	}
	ct, err := costs.New(Table())
	if err != nil {
		return cfg, fmt.Errorf("gemini: %w", err)
	}
	cfg.Base, cfg.Costs, cfg.ReadResponse = o.Base, ct, upstream(o.Minute)
	return cfg, nil
}

// check reports limits that are negative.
func (l Limits) check() error {
	if l.RPM < 0 || l.TPM < 0 || l.RPD < 0 {
		return fmt.Errorf("limits %+v must not be negative", l)
	}
	return nil
}

// buckets returns the RPM, RPD and TPM buckets of a model with limits l;
// a limit of 0 is not enforced.
func (o *Options) buckets(l Limits) map[string]tollgate.Bucket {
	minute, reserve := o.sizes().Length(), o.sizes().Reserve(DefaultReservePercent)
	orMax := func(n int64) int64 {
		if n == 0 {
			return maxUnits
		}
		return n
	}
	day := quota.PerDay(orMax(l.RPD), pacific)
	if o.Minute != 0 {
		day = quota.PerWindow(orMax(l.RPD), 1440*minute)
	}
	return map[string]tollgate.Bucket{
		RPM: {ReservePercent: reserve, Limits: []quota.Limit{quota.PerWindow(orMax(l.RPM), minute)}},
		RPD: {ReservePercent: reserve, Limits: []quota.Limit{day}},
		TPM: {ReservePercent: reserve, Limits: []quota.Limit{quota.PerWindow(orMax(l.TPM), minute)}},
	}
}

// forModel returns the Transport of a model's limits, or nil when it has
// none: Options.Models, then Options.Limits, then FreeTier.
func (t *Transport) forModel(model string) *tollgate.Transport {
	if tr, ok := t.models[model]; ok {
		return tr
	}
	if t.all != nil {
		return t.all
	}
	return t.defaults[model]
}

// RoundTrip charges the request to its model's buckets and sends it, as
// tollgate.Transport.RoundTrip does. It never modifies req, and closes its
// body on every path. Besides tollgate's errors, it fails before sending
// anything with an error matching ErrNoLimits for a model that has no
// limits, ErrBody for a body that is not a JSON object or is larger than
// Options.MaxBody, and ErrCountTokens when a request with parts by URI
// could not be counted.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	m, model := methodOf(req.Method, req.URL.Path)
	project := projectOf(req)
	if t.project != nil {
		var err error
		if project, err = provider.PoolOf("gemini", t.project, req); err != nil {
			return nil, err
		}
	}
	if m == other || m == countTokensFor {
		return t.free.RoundTrip(provider.WithScope(req, project))
	}
	tr := t.forModel(model)
	if tr == nil {
		provider.CloseBody(req)
		return nil, fmt.Errorf("%w %q: give it in Options.Models or Options.Limits (%s %s)", ErrNoLimits, modelName(model), methodNames[m], req.URL.Path)
	}
	body, f, err := provider.ReadParsed(req, t.maxBody, ErrBody, methodNames[m], func(b []byte) (facts, error) { return parse(m, b) })
	if err != nil {
		return nil, err
	}
	r := &read{facts: f, tokens: t.counting.tokens(f)}
	if f.uris > 0 {
		if r.tokens, err = t.countTokens(req, m, model, body); err != nil {
			return nil, err
		}
	}
	out := provider.Replay(withRead(req.Context(), r), req, body)
	return tr.RoundTrip(provider.WithScope(out, scopeName(project, model)))
}

// countTokens asks the API's countTokens method for a request's input
// tokens, with the request's credentials, through Base: it is free.
func (t *Transport) countTokens(req *http.Request, m method, model string, body []byte) (int64, error) {
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCountTokens, err)
	}
	var ask any
	switch m {
	case generate, stream:
		top["model"] = "models/" + model
		ask = map[string]any{"generateContentRequest": top}
	default:
		var contents []any
		if c, ok := top["content"]; ok {
			contents = append(contents, c)
		}
		reqs, _ := top["requests"].([]any)
		for _, e := range reqs {
			if o, ok := e.(map[string]any); ok && o["content"] != nil {
				contents = append(contents, o["content"])
			}
		}
		ask = map[string]any{"contents": contents}
	}
	b, err := json.Marshal(ask)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCountTokens, err)
	}
	u := *req.URL
	i := strings.LastIndex(u.Path, ":")
	u.Path = u.Path[:i] + ":countTokens"
	u.RawPath = ""
	q := u.Query()
	q.Del("alt")
	u.RawQuery = q.Encode()
	creq, err := http.NewRequestWithContext(req.Context(), http.MethodPost, u.String(), bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCountTokens, err)
	}
	for _, h := range []string{"X-Goog-Api-Key", "Authorization", "X-Goog-User-Project", "X-Goog-Api-Client", "User-Agent"} {
		if v := req.Header.Get(h); v != "" {
			creq.Header.Set(h, v)
		}
	}
	creq.Header.Set("Content-Type", "application/json")
	resp, err := t.base.RoundTrip(creq)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCountTokens, scrub(err, req))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return 0, fmt.Errorf("%w: the API answered %d", ErrCountTokens, resp.StatusCode)
	}
	var answer struct {
		TotalTokens int64 `json:"totalTokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil || answer.TotalTokens <= 0 {
		return 0, fmt.Errorf("%w: its answer tells no totalTokens (%v)", ErrCountTokens, err)
	}
	return min(answer.TotalTokens, maxUnits), nil
}

// scrub returns an error about a request with its key= removed from the
// URL it may quote.
func scrub(err error, req *http.Request) error {
	k := req.URL.Query().Get("key")
	if k == "" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), k, "[redacted]"))
}

// forScope returns the Transport of a scope's model.
func (t *Transport) forScope(scope string) (*tollgate.Transport, error) {
	_, model, ok := strings.Cut(scope, "/")
	if !ok {
		return t.free, nil
	}
	for m, tr := range t.models {
		if modelName(m) == model {
			return tr, nil
		}
	}
	if t.all != nil {
		return t.all, nil
	}
	if tr := t.defaults[model]; tr != nil {
		return tr, nil
	}
	return nil, fmt.Errorf("%w %q", ErrNoLimits, model)
}
