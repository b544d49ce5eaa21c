package shopify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/provider"
	"github.com/tollgate/tollgate/internal/told"
	"github.com/tollgate/tollgate/quota"
)

// Buckets of a scope (a shop and an app).
const (
	// Points is the GraphQL Admin API's bucket of query cost points.
	Points = "points"
	// Requests is the REST Admin API's bucket of requests.
	Requests = "requests"
)

// Defaults of Options.
const (
	// DefaultReservePercent is kept below both buckets.
	DefaultReservePercent = 5
	// DefaultMaxBody bounds the GraphQL request bodies read to estimate
	// their cost.
	DefaultMaxBody = 1 << 20
)

// The buckets assumed before an answer tells them: the smallest Shopify
// has documented.
const (
	assumedPoints   = 1000 // restored at 50 a second
	assumedRequests = 40   // leaking 2 a second
)

// endpointGraphQL and endpointREST name the cost table's endpoints.
const (
	endpointGraphQL = "graphql"
	endpointREST    = "rest"
)

// errBody matches the error of a GraphQL request whose body is larger
// than Options.MaxBody or cannot be read.
var errBody = errors.New("shopify: the GraphQL request's body")

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper
	// Shop names the shop of every request, e.g. "acme.myshopify.com",
	// for a host that is not the shop's own *.myshopify.com (a proxy, a
	// simulator). Empty: the request's host.
	Shop string
	// ReservePercent is kept below both buckets, rounded up; 0 means
	// DefaultReservePercent, a negative value none.
	ReservePercent float64
	// MaxBody bounds the GraphQL request bodies read to estimate their
	// cost; 0 means DefaultMaxBody.
	MaxBody int64
	// Points is the size assumed of a shop's GraphQL bucket until an
	// answer tells it, restored every 20 seconds, e.g. 2000 (restored at
	// 100 a second); 0 means 1,000, the smallest Shopify has documented.
	Points int64
	// Requests is the size assumed of a shop's REST bucket until an answer
	// tells it, leaked every 20 seconds, e.g. 400 (leaking 20 a second); 0
	// means 40.
	Requests int64

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Local and LocalShare, the hooks and Logger. NewTransport
	// fills in the rest: setting Base, Limiter, Costs, Buckets, Scope or
	// ReadResponse here is an error.
	Tollgate tollgate.Config
}

// Transport meters calls to Shopify's Admin API: an http.RoundTripper
// that charges each GraphQL query its estimated cost in points and each
// REST request one request, in the buckets of its shop and app, as
// Shopify counts them (see the package documentation). Build one with
// NewTransport; it is safe for concurrent use. Close it when done.
//
// Beside RoundTrip, it has Usage, Record and Pause, as
// tollgate.Transport has them, for a shop's app (see Scope) and its Points
// or Requests bucket ("" pauses both): Record counts what the app spent on
// the shop without tollgate. CloseIdleConnections reaches Options.Base;
// Close also releases the in-process Redis if NewTransport started one.
type Transport struct {
	controls // Usage, Record, Pause, CloseIdleConnections, Close: the kit's
	kit      *provider.Kit
	cfg      tollgate.Config // the Transports' configuration, but their buckets
	reserve  float64
	assumed  plan // before an answer tells a scope's buckets
	shop     string
	maxBody  int64

	mu      sync.Mutex
	plans   map[plan]*tollgate.Transport // by the bucket sizes they enforce
	learned map[string]plan              // by scope: the sizes its answers told
}

// controls are the methods of the kit that a Transport shows its users:
// embedded under this name, they are its own, and no field shows.
type controls = provider.Recording

// plan is the sizes of a scope's buckets (a shop's plan): each restores
// its size every period.
type plan struct{ points, requests int64 }

// Bounds on what one Transport learns.
const (
	maxPlans   = 16      // Transports of distinct sizes; past it, new sizes are not learned
	maxLearned = 1 << 14 // scopes whose sizes are kept; past it, they are learned afresh
)

// NewTransport returns a ready http.RoundTripper for Shopify's Admin API,
// from a Redis client shared by every process spending the same shops and
// tokens (nil runs an in-process Redis, for a single process) and options
// (nil for the defaults). It checks the whole configuration: an error
// here is one the first request would otherwise meet.
func NewTransport(rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg := opts.Tollgate
	owned := provider.Owned{Provider: "shopify", Upstream: "Shopify", Buckets: "no option: Shopify's answers tell them",
		Scope: "the scope is the shop and the app's access token", Sizes: &provider.Sizes{MaxBody: opts.MaxBody, ReservePercent: opts.ReservePercent}}
	if err := owned.Check(cfg); err != nil {
		return nil, err
	}
	if opts.Points < 0 || opts.Requests < 0 {
		return nil, fmt.Errorf("shopify: Options.Points %d and Options.Requests %d must not be negative", opts.Points, opts.Requests)
	}
	if strings.ContainsAny(opts.Shop, "/ ") {
		return nil, fmt.Errorf("shopify: Options.Shop %q: a shop's name has no \"/\" or space", opts.Shop)
	}
	ct, err := costs.New(table())
	if err != nil {
		return nil, fmt.Errorf("shopify: %w", err)
	}
	cfg.Base, cfg.Costs, cfg.ReadResponse, cfg.Scope = reader{base: opts.Base}, ct, upstream, provider.ScopeOf
	t := &Transport{cfg: cfg, reserve: owned.Sizes.Reserve(DefaultReservePercent), assumed: plan{opts.Points, opts.Requests},
		shop: opts.Shop, maxBody: opts.MaxBody,
		plans: make(map[plan]*tollgate.Transport), learned: make(map[string]plan)}
	if t.assumed.points == 0 {
		t.assumed.points = assumedPoints
	}
	if t.assumed.requests == 0 {
		t.assumed.requests = assumedRequests
	}
	if t.maxBody == 0 {
		t.maxBody = DefaultMaxBody
	}
	if t.kit, err = provider.Start("shopify", rdb); err != nil {
		return nil, err
	}
	t.controls = t.kit.Recording
	t.kit.Pick(func(scope string) (*tollgate.Transport, error) { return t.transport(scope), nil })
	if _, err := t.build(t.assumed); err != nil {
		return nil, t.kit.Fail(err)
	}
	return t, nil
}

// build returns the Transport of a plan, building it the first time;
// t.mu is held, but in NewTransport.
func (t *Transport) build(p plan) (*tollgate.Transport, error) {
	if tr := t.plans[p]; tr != nil {
		return tr, nil
	}
	// Each bucket follows what Shopify's answers tell of it (answer.go).
	bucket := func(name string, size int64) tollgate.Bucket {
		return tollgate.Bucket{ReservePercent: t.reserve, Follows: dialect + "/" + name,
			Limits: []quota.Limit{quota.TokenBucket(size, size, period)}}
	}
	cfg := t.cfg
	cfg.Buckets = map[string]tollgate.Bucket{Points: bucket(Points, p.points), Requests: bucket(Requests, p.requests)}
	tr, err := t.kit.New(cfg)
	if err != nil {
		return nil, err
	}
	t.plans[p] = tr
	return tr, nil
}

// transport returns the Transport that decides a scope's requests: that of
// the sizes its answers told, or of the assumed ones. Every size keeps
// its bucket's keys in Redis (a token bucket's level is kept as the
// instant it is full again, the same for every size of one period), so a
// scope moves between them with the share of its bucket it has spent.
func (t *Transport) transport(scope string) *tollgate.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.learned[scope]
	if !ok {
		return t.plans[t.assumed]
	}
	if tr := t.plans[p]; tr != nil {
		return tr
	}
	if len(t.plans) < maxPlans {
		if tr, err := t.build(p); err == nil {
			return tr
		}
	}
	return t.plans[t.assumed]
}

// learn records the size of a scope's bucket an answer told.
func (t *Transport) learn(scope, bucket string, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.learned[scope]
	if !ok {
		p = t.assumed
	}
	if bucket == Points {
		p.points = size
	} else {
		p.requests = size
	}
	if len(t.learned) >= maxLearned {
		clear(t.learned)
	}
	t.learned[scope] = p
}

// table is the cost table: a GraphQL query its estimate in points,
// settled to its actualQueryCost; any other request under /admin/ one
// request.
func table() costs.Spec {
	graphQL := costs.Rule{Endpoint: endpointGraphQL, Func: graphQLEndpoint}
	spec := costs.Spec{Catalog: true, Buckets: []string{Points, Requests}}
	for _, pattern := range []string{"POST /admin/api/{version}/graphql.json", "POST /admin/api/graphql.json"} {
		graphQL.Pattern = pattern
		spec.Rules = append(spec.Rules, graphQL)
	}
	spec.Rules = append(spec.Rules, costs.Rule{Pattern: "/admin/", Endpoint: endpointREST, Charges: []costs.Charge{{Bucket: Requests, Units: 1}}})
	return spec
}

// graphQLEndpoint is the Func of the GraphQL rules: the estimate
// RoundTrip made, settled to the answer's actualQueryCost
// (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits:
// the requested cost is taken, the difference to the actual cost given
// back).
func graphQLEndpoint(req *http.Request) (costs.Endpoint, error) {
	a := answerOf(req)
	if a == nil || a.estimate < 1 {
		return costs.Endpoint{}, errors.New("shopify: the GraphQL request did not come through the Transport's RoundTrip")
	}
	return costs.Endpoint{Name: endpointGraphQL,
		Charges: []costs.Charge{{Bucket: Points, Units: a.estimate}},
		Settle:  []costs.Settle{{Bucket: Points, Field: "extensions.cost.actualQueryCost"}}}, nil
}

// isGraphQL reports whether req is a GraphQL Admin API request, as the
// cost table's GraphQL rules match them.
func isGraphQL(req *http.Request) bool {
	rest, ok := strings.CutPrefix(req.URL.Path, "/admin/api/")
	if !ok || req.Method != http.MethodPost {
		return false
	}
	version, _ := strings.CutSuffix(rest, "/graphql.json")
	return rest == "graphql.json" || version != rest && version != "" && !strings.Contains(version, "/")
}

// Scope returns the scope of a shop's app: the shop (e.g.
// "acme.myshopify.com") and a hash of its access token, which Shopify
// meters together ("GraphQL Admin API rate limits are based on the
// combination of the app and store",
// https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits).
func Scope(shop, token string) string {
	return shop + "/" + tollgate.HashCredential(token)
}

// scopeOf returns the scope of a request.
func (t *Transport) scopeOf(req *http.Request) string {
	shop := t.shop
	if shop == "" {
		shop = strings.ToLower(req.URL.Host)
		if shop == "" {
			shop = strings.ToLower(req.Host)
		}
		if h, _, err := net.SplitHostPort(shop); err == nil {
			shop = h
		}
	}
	return Scope(shop, req.Header.Get("X-Shopify-Access-Token"))
}

// RoundTrip charges the request to its shop and app's bucket and sends
// it, as tollgate.Transport.RoundTrip does. It never modifies req, and
// closes its body on every path. A GraphQL request's body is read whole
// (up to Options.MaxBody) to estimate its cost; a body that is not a
// GraphQL request Shopify could run fails before anything is sent. A
// THROTTLED answer, or a 429, comes back as a *tollgate.QuotaError
// (errors.Is(err, tollgate.ErrQuotaExhausted)), every worker pausing the
// bucket meanwhile.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := &answer{}
	ctx := told.With(withAnswer(req.Context(), a))
	out := req.WithContext(ctx)
	if isGraphQL(req) {
		body, err := provider.ReadBody(req, t.maxBody, errBody)
		if err != nil {
			return nil, err
		}
		if a.estimate, err = estimate(body); err != nil {
			return nil, err
		}
		out = provider.Replay(ctx, req, body)
	}
	scope := t.scopeOf(req)
	resp, err := t.transport(scope).RoundTrip(provider.WithScope(out, scope))
	if a.size > 0 {
		bucket := Requests
		if isGraphQL(req) {
			bucket = Points
		}
		t.learn(scope, bucket, a.learned)
	}
	return resp, err
}
