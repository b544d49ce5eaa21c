package github

import (
	"bytes"
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

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// Table is the cost table; zero means Table().
	Table costs.Spec

	// Buckets adds or replaces the limits of buckets: for tables extended
	// with buckets of your own, or limits of your own (e.g. Content at 1 a
	// second, as GitHub's best practices suggest for mutative requests).
	// Requests without credentials keep GitHub's limits for them in Core
	// and Search (60 an hour, 10 a minute).
	Buckets map[string]tollgate.Bucket

	// ReserveUnits is kept below every limit but the cap on requests in
	// flight. When zero, ReservePercent is kept instead: 0 means 5%, a
	// negative value none.
	ReserveUnits   int64
	ReservePercent float64

	// Minute and Hour are the lengths of GitHub's minute and hour (0: the
	// real ones), for tests and demos against a simulated API that runs
	// faster: every limit, and the least pause after a secondary limit, is
	// counted in them. Resets that GitHub announces are whole seconds, so
	// windows announced as fixed (Core and GraphQL, an Hour) should last
	// several seconds.
	Minute, Hour time.Duration

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Routes, Local and LocalShare, the hooks and Logger.
	// NewTransport fills in the rest: setting Base, Limiter, Costs,
	// Buckets, Scope or Upstream here is an error.
	Tollgate tollgate.Config
}

// Transport meters GitHub API calls: an http.RoundTripper, safe for
// concurrent use, to give go-github (github.NewClient(&http.Client{
// Transport: tr})) or any other client. Each credential in the
// Authorization header is a scope, named by its hash
// (tollgate.HashCredential of the token); requests without one share
// AnonymousScope. Close it when done.
//
// Beside RoundTrip, it has Usage, Record and Pause, as
// tollgate.Transport has them, for a scope (a credential's hash or
// AnonymousScope) and a bucket: Record adds what a credential spent on
// GitHub without tollgate, Pause with "" stops every bucket.
// CloseIdleConnections reaches Options.Base; Close releases the leases and
// the slots of bodies still open, and the in-process Redis if NewTransport
// started one.
type Transport struct {
	controls      // Usage, Record, Pause, CloseIdleConnections, Close: the kit's
	authenticated *tollgate.Transport
	anonymous     *tollgate.Transport
	kit           *provider.Kit
}

// controls are the methods of the kit that a Transport shows its users:
// embedded under this name, they are its own, and no field shows.
type controls = provider.Recording

// NewTransport returns a ready http.RoundTripper for GitHub's REST and
// GraphQL APIs, from a Redis client shared by every process spending the
// same credentials (nil runs an in-process Redis, for a single process)
// and options (nil for the defaults). It checks the whole configuration:
// an error here is one the first request would otherwise meet.
func NewTransport(rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	table := opts.Table
	if len(table.Rules) == 0 {
		table = Table()
	}
	ct, err := costs.New(table)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	anonymousCosts, err := costs.New(withoutNotModified(table))
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	t := &Transport{}
	if t.kit, err = provider.Start("github", rdb); err != nil {
		return nil, err
	}
	t.controls = t.kit.Recording
	t.kit.Pick(t.transportOf)
	upstream := Upstream(opts.Minute)
	build := func(ct *costs.Table, buckets map[string]tollgate.Bucket, scope tollgate.ScopeFunc) (*tollgate.Transport, error) {
		cfg := opts.Tollgate
		cfg.Base, cfg.Costs, cfg.Buckets, cfg.Scope, cfg.ReadResponse = opts.Base, ct, buckets, scope, upstream
		return t.kit.New(cfg)
	}
	authenticated, anonymous := opts.buckets(false), opts.buckets(true)
	for name, b := range opts.Buckets {
		authenticated[name] = b
		if name != Core && name != Search {
			anonymous[name] = b
		}
	}
	if t.authenticated, err = build(ct, authenticated, tollgate.CredentialScope(credential)); err != nil {
		return nil, t.kit.Fail(err)
	}
	if t.anonymous, err = build(anonymousCosts, anonymous, tollgate.Scope(AnonymousScope)); err != nil {
		return nil, t.kit.Fail(err)
	}
	return t, nil
}

// withoutNotModified returns a copy of spec whose rules no longer settle
// a 304 Not Modified to its own cost: for requests without credentials,
// whose conditional requests GitHub counts like any other (the etag page
// of Table: only those "correctly authorized with an Authorization
// header" are free).
func withoutNotModified(spec costs.Spec) costs.Spec {
	keep := func(settle []costs.Settle) []costs.Settle {
		var out []costs.Settle
		for _, st := range settle {
			if st.Status != http.StatusNotModified {
				out = append(out, st)
			}
		}
		return out
	}
	out := spec
	out.Rules = make([]costs.Rule, len(spec.Rules))
	for i, r := range spec.Rules {
		r.Settle = keep(r.Settle)
		out.Rules[i] = r
	}
	if spec.Default != nil {
		d := *spec.Default
		d.Settle = keep(d.Settle)
		out.Default = &d
	}
	return out
}

// check reports the options NewTransport cannot use.
func (o *Options) check() error {
	owned := provider.Owned{Provider: "github", Upstream: "GitHub", Buckets: "Options.Buckets",
		Scope: "the scope is the request's credential"}
	if err := owned.Check(o.Tollgate); err != nil {
		return err
	}
	switch {
	case o.ReserveUnits < 0:
		return fmt.Errorf("github: Options.ReserveUnits is %d; it must not be negative", o.ReserveUnits)
	case o.Minute < 0 || o.Hour < 0:
		return fmt.Errorf("github: Options.Minute (%v) and Options.Hour (%v) must not be negative", o.Minute, o.Hour)
	}
	return nil
}

// buckets returns GitHub's limits, for requests with credentials or
// (anonymous) without: primary ones tied to what GitHub announces, with
// the reserve kept below them; secondary ones, which GitHub does not
// announce, with the reserve too; the cap on requests in flight, exact.
func (o *Options) buckets(anonymous bool) map[string]tollgate.Bucket {
	minute, hour := minuteOr(o.Minute), hourOr(o.Hour)
	reserve := tollgate.Bucket{ReserveUnits: o.ReserveUnits}
	switch {
	case o.ReserveUnits != 0:
	case o.ReservePercent == 0:
		reserve.ReservePercent = defaultReservePercent
	case o.ReservePercent > 0:
		reserve.ReservePercent = o.ReservePercent
	}
	bucket := func(announced string, limits ...quota.Limit) tollgate.Bucket {
		b := reserve
		b.Limits, b.Follows = limits, announced
		return b
	}
	core, search := int64(defaultCore), int64(defaultSearch)
	if anonymous {
		core, search = defaultAnonymousCore, defaultAnonymousSearch
	}
	return map[string]tollgate.Bucket{
		// GitHub's hour starts with the first request after a reset and
		// ends at the reset it announces (rest, graphql).
		Core:    bucket("github/"+Core, quota.PerFixedWindow(core, hour, time.Time{})),
		GraphQL: bucket("github/"+GraphQL, quota.PerFixedWindow(defaultGraphQL, hour, time.Time{})),
		// GitHub does not say how its minutes are counted: a sliding
		// minute never counts less than any fixed one.
		Search:        bucket("github/"+Search, quota.PerWindow(search, minute)),
		CodeSearch:    bucket("github/"+CodeSearch, quota.PerWindow(defaultCodeSearch, minute)),
		RESTPoints:    bucket("", quota.PerWindow(defaultRESTPoints, minute)),
		GraphQLPoints: bucket("", quota.PerWindow(defaultGraphQLPoints, minute)),
		Content:       bucket("", quota.PerWindow(defaultContentMinute, minute), quota.PerWindow(defaultContentHour, hour)),
		Concurrent:    {Limits: []quota.Limit{quota.PerWindow(quota.MaxUnits, minute)}, MaxInFlight: defaultInFlight},
	}
}

// RoundTrip sends req through the quota of its credential (of
// AnonymousScope without one), as tollgate.Transport.RoundTrip does. A
// GraphQL request whose body cannot be read twice is buffered first, so
// that it can be priced; the body of a GraphQL answer is read to its end
// when closed, so that its rateLimit { cost } settles the estimate even
// when the caller's decoder stops at the end of the JSON value.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := t.authenticated
	if credential(req) == "" {
		tr = t.anonymous
	}
	graphQL := isGraphQL(req)
	if graphQL && req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		var err error
		if req, err = replayable(req); err != nil {
			return nil, err
		}
	}
	resp, err := tr.RoundTrip(req)
	if err == nil && graphQL && resp.Body != nil {
		resp.Body = drainOnClose{resp.Body}
	}
	return resp, err
}

// isGraphQL reports whether req is sent to GitHub's GraphQL endpoint:
// /graphql, or /api/graphql on GitHub Enterprise Server.
func isGraphQL(req *http.Request) bool {
	return req.Method == http.MethodPost && req.URL != nil && strings.HasSuffix(req.URL.Path, "/graphql")
}

// replayable returns a copy of req whose body can be read again
// (GetBody), and closes req's body, whose bytes the copy holds.
func replayable(req *http.Request) (*http.Request, error) {
	defer req.Body.Close()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxGraphQLBody+1))
	if err != nil {
		return nil, fmt.Errorf("github: reading the GraphQL request's body: %w", err)
	}
	if len(body) > maxGraphQLBody {
		return nil, fmt.Errorf("github: the GraphQL request's body is over %d bytes", maxGraphQLBody)
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out, nil
}

// drainAtClose bounds what Close reads of a body the caller left unread.
const drainAtClose = 64 << 10

// drainOnClose reads what is left of a body (up to drainAtClose) before
// closing it, so that the end of the body is seen.
type drainOnClose struct{ io.ReadCloser }

func (d drainOnClose) Close() error {
	io.Copy(io.Discard, io.LimitReader(d.ReadCloser, drainAtClose))
	return d.ReadCloser.Close()
}

// transportOf returns the Transport that meters scope.
func (t *Transport) transportOf(scope string) (*tollgate.Transport, error) {
	if scope == AnonymousScope {
		return t.anonymous, nil
	}
	return t.authenticated, nil
}
