package openai

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/provider"
	"github.com/tollgate/tollgate/quota"
)

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// Limits are every model's limits, but those Models names; zero
	// learns each model's limits per minute from its responses.
	Limits Limits
	// Models gives some models' limits, by model name (for Azure OpenAI,
	// the deployment's name), replacing Limits for them.
	Models map[string]Limits

	// Counting says how requests' tokens are counted; the zero value is
	// OpenAI's rule (see Counting).
	Counting Counting
	// Table is the cost table; zero means Table(Counting).
	Table costs.Spec

	// ReservePercent is kept below every limit, rounded up; 0 means
	// DefaultReservePercent, a negative value none.
	ReservePercent float64
	// Minute, when set, is how long a minute lasts (and a day, 1440 of
	// them), for tests and demos against a simulated server whose time
	// runs faster; 0 means time.Minute.
	Minute time.Duration
	// MaxBody bounds the request bodies read to count their tokens; 0
	// means DefaultMaxBody.
	MaxBody int64

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Local and LocalShare, Routes, the hooks and Logger. Its
	// Scope, when set, names the pool of a request instead of its key,
	// organization and project (e.g. tollgate.Scope("org-acme") for keys
	// of one organization), and must not contain "/": the model is joined
	// to it after a "/". Routes' scopes are taken as they are. NewTransport
	// fills in the rest: setting Base, Limiter, Costs, Buckets or Upstream
	// here is an error.
	Tollgate tollgate.Config
}

// Transport meters calls to an OpenAI-compatible API: an http.RoundTripper
// that charges each request to its model's Requests and Tokens buckets in
// its pool, and returns a *BillingError for a 429 insufficient_quota. It
// reads the body of each request that counts tokens once, whole (up to
// Options.MaxBody), before charging it. Build one with NewTransport; it is
// safe for concurrent use. Close it when done.
//
// Beside RoundTrip, it has Usage, Record and Pause, as
// tollgate.Transport has them, for a scope (see Scope) and a model's
// Requests or Tokens bucket (Pause: "" for all of them);
// CloseIdleConnections, for Options.Base's idle connections; and Close,
// which also releases the in-process Redis when nil was given to
// NewTransport.
type Transport struct {
	controls                    // Usage, Record, Pause, CloseIdleConnections, Close: the kit's
	models   *provider.Learning // by model; "" for the models Options.Models does not name
	pool     tollgate.ScopeFunc // Options.Tollgate.Scope; nil: by credential
	maxBody  int64
	kit      *provider.Kit
}

// controls are the methods of the kit that a Transport shows its users:
// embedded under this name, they are its own, and no field shows.
type controls = provider.Recording

// NewTransport returns a ready http.RoundTripper for an OpenAI-compatible
// API, from a Redis client shared by every process spending the same keys
// (nil runs an in-process Redis, for a single process) and options (nil
// for the defaults). It checks the whole configuration: an error here is
// one the first request would otherwise meet.
func NewTransport(rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	models, err := provider.Sets("openai", "Models", "model", opts.Limits, opts.Models)
	if err != nil {
		return nil, err
	}
	t := &Transport{pool: opts.Tollgate.Scope, maxBody: opts.sizes().Body(DefaultMaxBody)}
	cfg.Scope = provider.ScopeOf
	if t.kit, err = provider.Start("openai", rdb); err != nil {
		return nil, err
	}
	t.controls = t.kit.Recording
	if t.models, err = provider.Learn(t.kit, cfg, "openai", modelName, models, opts.buckets, Limits.unlearned); err != nil {
		return nil, err
	}
	return t, nil
}

// sizes are the options that the kit checks and reads alike for every
// provider that may run on a scaled clock.
func (o *Options) sizes() *provider.Sizes {
	return &provider.Sizes{Minute: o.Minute, MaxBody: o.MaxBody, ReservePercent: o.ReservePercent}
}

// config checks the options and assembles the tollgate.Config they ask
// for, all but the scope, buckets and limiter.
func (o *Options) config() (tollgate.Config, error) {
	cfg := o.Tollgate
	owned := provider.Owned{Provider: "openai", Upstream: "OpenAI", Buckets: "Options.Limits and Options.Models", Sizes: o.sizes()}
	if err := owned.Check(cfg); err != nil {
		return cfg, err
	}
	c := o.Counting
	if c.CharsPerToken < 0 || c.OutputTokens < 0 || c.MediaTokens < 0 {
		return cfg, fmt.Errorf("openai: Options.Counting %+v: counts must not be negative", c)
	}
	if err := provider.CheckLimits("openai", "Models", o.Models, o.Limits, Limits.check); err != nil {
		return cfg, err
	}
	ct, err := provider.Costs("openai", o.Table, Table(c))
	if err != nil {
		return cfg, err
	}
	cfg.Base, cfg.Costs, cfg.ReadResponse = o.Base, ct, Upstream()
	return cfg, nil
}

// check reports limits that are negative.
func (l Limits) check() error {
	if l.RPM < 0 || l.TPM < 0 || l.RPD < 0 || l.TPD < 0 {
		return fmt.Errorf("limits %+v must not be negative", l)
	}
	return nil
}

// buckets returns the Requests and Tokens buckets of a model with limits
// l: a minute each, learned from the x-ratelimit-* headers unless given
// (for unannounced, a minute not given is not limited), and a day when given.
func (o *Options) buckets(l Limits, unannounced bool) map[string]tollgate.Bucket {
	minute, reserve := o.sizes().Length(), o.sizes().Reserve(DefaultReservePercent)
	bucket := func(perMinute, perDay int64, announced string) tollgate.Bucket {
		if perMinute == 0 && unannounced {
			perMinute = maxUnits
		}
		b := tollgate.Bucket{ReservePercent: reserve, Follows: announced,
			Limits: []quota.Limit{quota.PerWindow(perMinute, minute)}}
		if perDay > 0 {
			b.Limits = append(b.Limits, quota.PerWindow(perDay, 24*60*minute))
		}
		return b
	}
	return map[string]tollgate.Bucket{
		Requests: bucket(l.RPM, l.RPD, "openai/requests"),
		Tokens:   bucket(l.TPM, l.TPD, "openai/tokens"),
	}
}

// RoundTrip charges the request to its model's buckets and sends it, as
// tollgate.Transport.RoundTrip does. It never modifies req, and closes its
// body on every path. Besides tollgate's errors, it fails with an error
// matching ErrBody, before sending anything, when a request that counts
// tokens has a body that is not a JSON object or is larger than
// Options.MaxBody; and with a *BillingError when the upstream answers 429
// insufficient_quota (but to OpenAI's own SDKs: see BillingError).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := kindOf(req.Method, req.URL.Path)
	model := deploymentOf(req.URL.Path)
	out := req
	ctx := req.Context()
	if k != other {
		body, f, err := provider.ReadParsed(req, t.maxBody, ErrBody, req.Method, parse)
		if err != nil {
			return nil, err
		}
		if model == "" {
			model = f.model
		}
		out = provider.Replay(withRead(ctx, &read{facts: f}), req, body)
	}
	pool := poolOf(req)
	if t.pool != nil {
		var err error
		if pool, err = provider.PoolOf("openai", t.pool, out); err != nil {
			return nil, err
		}
	}
	scope := scopeName(pool, model)
	out = provider.WithScope(out, scope)
	ctx = out.Context()
	inner, done, err := t.models.Route(ctx, model, scope)
	if err != nil {
		provider.CloseBody(out)
		return nil, err
	}
	resp, err := inner.RoundTrip(out)
	done(resp)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		body, _ := tollgate.PeekBody(resp, maxErrorBody)
		if isBilling(body) {
			if retriesOnItsOwn(req) {
				resp.Header.Set("X-Should-Retry", "false")
				return resp, nil
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
			resp.Body.Close()
			return nil, billingError(endpointNames[k], scope, body)
		}
	}
	return resp, nil
}
