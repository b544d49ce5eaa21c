package anthropic

import (
	"fmt"
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

	// Limits are every model class's limits, but those Classes names;
	// zero learns each class's limits from its responses.
	Limits Limits
	// Classes gives some classes' limits, by class (see ModelClass), e.g.
	// "claude-sonnet-4", replacing Limits for them.
	Classes map[string]Limits
	// Class names the class whose limits a model spends; nil means
	// ModelClass.
	Class func(model string) string

	// Counting says how requests' tokens are counted; the zero value is
	// Anthropic's rule (see Counting).
	Counting Counting
	// CacheReads reports whether the cache reads
	// (usage.cache_read_input_tokens) of a class count toward its ITPM,
	// when a request that uses the prompt cache is settled (see Counting);
	// nil means DefaultCacheReads, the rate limits page's marks.
	CacheReads func(class string) bool
	// Table is the cost table; zero means Table(Counting).
	Table costs.Spec

	// ReservePercent is kept below every limit, rounded up; 0 means
	// DefaultReservePercent, a negative value none.
	ReservePercent float64
	// Minute, when set, is how long a minute lasts, for tests and demos
	// against a simulated server whose time runs faster; 0 means
	// time.Minute.
	Minute time.Duration
	// MaxBody bounds the request bodies read to count their tokens; 0
	// means DefaultMaxBody.
	MaxBody int64
	// ConservativeRefunds gives back the output tokens a request did not
	// use as any token bucket's refund: less what the bucket refilled
	// while later requests counted on them. By default they are given
	// back as Anthropic gives them back, all at once, up to a full bucket
	// (quota.Limit.AsUpstream), which lets long answers spend the OTPM
	// they leave: see docs/token-buckets.md.
	ConservativeRefunds bool

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Local and LocalShare, Routes, the hooks and Logger. Its
	// Scope, when set, names the pool of a request instead of its key
	// (e.g. tollgate.Scope("org-acme") for keys of one organization), and
	// must not contain "/": the class is joined to it after a "/". Routes'
	// scopes are taken as they are. NewTransport fills in the rest:
	// setting Base, Limiter, Costs, Buckets or ReadResponse here is an
	// error.
	Tollgate tollgate.Config

	// clock, when set, is the limiter's clock (quota.WithClock) instead of
	// Redis's: tests freeze it, so that the buckets they read do not
	// refill while they do (export_test.go).
	clock func() time.Time
}

// Transport meters calls to Anthropic's Messages API: an
// http.RoundTripper that charges each request to its model class's
// Requests, InputTokens and OutputTokens buckets in its pool. It reads the
// body of each Messages request once, whole (up to Options.MaxBody),
// before charging it. Build one with NewTransport; it is safe for
// concurrent use. Close it when done.
//
// Beside RoundTrip, it has Usage, Record and Pause, as
// tollgate.Transport has them, for a scope (see Scope) and a model class's
// Requests, InputTokens or OutputTokens bucket ("" pauses every bucket of
// the scope's class); CloseIdleConnections, which reaches Options.Base;
// and Close, which also ends the Redis NewTransport ran in-process when it
// was given none.
type Transport struct {
	controls                    // Usage, Record, Pause, CloseIdleConnections, Close: the kit's
	classes  *provider.Learning // by class; "" for the classes Options.Classes does not name
	pool     tollgate.ScopeFunc // Options.Tollgate.Scope; nil: by credential
	class    func(string) string
	reads    func(string) bool // Options.CacheReads
	routed   bool              // Options.Tollgate.Routes are set
	maxBody  int64
	kit      *provider.Kit
}

// controls are the methods of the kit that a Transport shows its users:
// embedded under this name, they are its own, and no field shows.
type controls = provider.Recording

// NewTransport returns a ready http.RoundTripper for Anthropic's Messages
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
	t := &Transport{pool: opts.Tollgate.Scope, class: opts.Class, maxBody: opts.sizes().Body(DefaultMaxBody),
		reads: opts.CacheReads, routed: len(opts.Tollgate.Routes) > 0}
	if t.class == nil {
		t.class = ModelClass
	}
	if t.reads == nil {
		t.reads = DefaultCacheReads
	}
	classes, err := provider.Sets("anthropic", "Classes", "class", opts.Limits, opts.Classes)
	if err != nil {
		return nil, err
	}
	cfg.Scope = provider.ScopeOf
	cfg.Base = &cacheCounter{base: cfg.Base, t: t}
	var lopts []quota.Option
	if opts.clock != nil {
		lopts = append(lopts, quota.WithClock(opts.clock))
	}
	if t.kit, err = provider.Start("anthropic", rdb, lopts...); err != nil {
		return nil, err
	}
	t.controls = t.kit.Recording
	if t.classes, err = provider.Learn(t.kit, cfg, "anthropic", className, classes, opts.buckets, Limits.unlearned); err != nil {
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
	owned := provider.Owned{Provider: "anthropic", Upstream: "Anthropic", Buckets: "Options.Limits and Options.Classes", Sizes: o.sizes()}
	if err := owned.Check(cfg); err != nil {
		return cfg, err
	}
	if !o.Counting.check() {
		return cfg, fmt.Errorf("anthropic: Options.Counting %+v: counts must not be negative", o.Counting)
	}
	if err := provider.CheckLimits("anthropic", "Classes", o.Classes, o.Limits, Limits.check); err != nil {
		return cfg, err
	}
	ct, err := provider.Costs("anthropic", o.Table, Table(o.Counting))
	if err != nil {
		return cfg, err
	}
	cfg.Base, cfg.Costs, cfg.ReadResponse = o.Base, ct, Upstream()
	return cfg, nil
}

// check reports limits that are negative.
func (l Limits) check() error {
	if l.RPM < 0 || l.ITPM < 0 || l.OTPM < 0 {
		return fmt.Errorf("limits %+v must not be negative", l)
	}
	return nil
}

// bucketLimit is the limit tollgate enforces for an upstream token bucket
// of perMinute units, refilled continuously at perMinute units a minute:
// Anthropic's own shape ("the maximum capacity is continuously
// replenished", https://docs.anthropic.com/en/api/rate-limits). 0 means
// to be learned from the headers: the refill of 1 only marks the limit a
// token bucket until the learned capacity sets both (tollgate's
// limits.go). A capacity the engine cannot hold (past quota.MaxRefillSpan
// over a minute in µs: 37,529,996 units for a real minute) is kept at the
// most it holds, its refill perMinute: less at once, never more over any
// span; tollgate's limits.go does the same for a learned one.
func bucketLimit(perMinute int64, minute time.Duration) quota.Limit {
	return quota.TokenBucket(min(perMinute, quota.MaxRefillSpan/max(minute.Microseconds(), 1)), max(perMinute, 1), minute)
}

// buckets returns the Requests, InputTokens and OutputTokens buckets of a
// class with limits l, each learned from the anthropic-ratelimit-* headers
// unless given (for unannounced, a limit not given is not limited).
func (o *Options) buckets(l Limits, unannounced bool) map[string]tollgate.Bucket {
	minute, reserve := o.sizes().Length(), o.sizes().Reserve(DefaultReservePercent)
	bucket := func(perMinute int64, announced string, asUpstream bool) tollgate.Bucket {
		limit := bucketLimit(perMinute, minute)
		limit.AsUpstream = asUpstream
		if perMinute == 0 && unannounced {
			limit = quota.PerWindow(maxUnits, minute) // not limited: nothing to learn it from
		}
		return tollgate.Bucket{ReservePercent: reserve, Follows: announced, Limits: []quota.Limit{limit}}
	}
	// OTPM is "estimated based on max_tokens at the beginning of each
	// request and adjusted at the end of the request to reflect the actual
	// number of output tokens used" (rate limits page): its refunds give
	// back what Anthropic gives back (quota.Limit.AsUpstream). ITPM counts
	// a request's input once, when it arrives: its estimate, settled to
	// the usage, is refunded as any bucket's.
	return map[string]tollgate.Bucket{
		Requests:     bucket(l.RPM, "anthropic/requests", false),
		InputTokens:  bucket(l.ITPM, "anthropic/input-tokens", false),
		OutputTokens: bucket(l.OTPM, "anthropic/output-tokens", !o.ConservativeRefunds),
	}
}

// RoundTrip charges the request to its model class's buckets and sends
// it, as tollgate.Transport.RoundTrip does. It never modifies req, and
// closes its body on every path. Besides tollgate's errors, it fails with
// an error matching ErrBody, before sending anything, when a Messages
// request has a body that is not a JSON object or is larger than
// Options.MaxBody.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := kindOf(req.Method, req.URL.Path)
	out := req
	ctx := req.Context()
	var model string
	var r *read
	if k == messages || k == countTokens {
		body, f, err := provider.ReadParsed(req, t.maxBody, ErrBody, req.Method, parse)
		if err != nil {
			return nil, err
		}
		model = f.model
		r = &read{facts: f}
		out = provider.Replay(withRead(ctx, r), req, body)
	}
	poolName := pool(credentialOf(req))
	if t.pool != nil {
		var err error
		if poolName, err = provider.PoolOf("anthropic", t.pool, out); err != nil {
			return nil, err
		}
	}
	class := ""
	if model != "" {
		class = t.class(model)
	}
	if r != nil && r.facts.cached && !t.routed {
		// Settled to input_tokens and the cache tokens that count (see
		// cacheCounter); through Routes, charged to scopes of their own,
		// the estimate stays.
		r.settleCache, r.cacheReads = true, t.reads(class)
	}
	scope := scopeName(poolName, class)
	out = provider.WithScope(out, scope)
	ctx = out.Context()
	inner, done, err := t.classes.Route(ctx, class, scope)
	if err != nil {
		provider.CloseBody(out)
		return nil, err
	}
	resp, err := inner.RoundTrip(out)
	done(resp)
	return resp, err
}
