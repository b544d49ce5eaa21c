// Package shopsim simulates Shopify's Admin API in process, for tests. It
// is the upstream truth: it meters every app's buckets on every shop as
// Shopify documents them, and refuses as Shopify refuses, so that a test
// can check that the throttler in front of it never made Shopify say no,
// and can show the throttler Shopify's refusals when it did.
//
// What it enforces, per shop (the request's host, or Config.Shop) and app
// (the X-Shopify-Access-Token header; a request without one is answered
// 401 and spends nothing):
//
//   - GraphQL Admin API (POST /admin/api/{version}/graphql.json), a leaky
//     bucket of points per app and store ("Calls from one app don't affect
//     the rate limits of another app, even on the same store",
//     https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits;
//     the leaky bucket: https://shopify.dev/docs/api/usage/limits):
//     Config.Points at most (1,000), restored at Config.Restore a second
//     (50), the smallest bucket Shopify has documented. A query's cost is
//     calculated before it runs, from the query (the first page's "Cost
//     calculation"): scalars and enums 0, objects 1,
//     connections 2 plus their page size (first or last) times the cost of
//     one of their nodes, a mutation field 10; at most 1,000 points a
//     query (MAX_COST_EXCEEDED otherwise). The requested cost is taken from
//     the bucket before the query runs and the difference to the actual
//     cost given back after: the
//     actual cost counts the nodes a connection really returns, at most
//     Config.Items. A query whose requested cost is more than the bucket
//     holds is answered HTTP 200 with errors[].extensions.code "THROTTLED"
//     and spends nothing. Every answer carries extensions.cost:
//     requestedQueryCost, actualQueryCost (null when not run),
//     throttleStatus {maximumAvailable, currentlyAvailable, restoreRate}.
//   - REST Admin API (any other path under /admin/), a leaky bucket of
//     requests (https://shopify.dev/docs/api/usage/limits;
//     https://shopify.dev/docs/api/usage/rate-limits):
//     Config.Requests (40) leaking Config.Leak a second (2). Every answer
//     carries X-Shopify-Shop-Api-Call-Limit ("32/40"); a request that
//     finds the bucket full is answered 429 with a decimal Retry-After
//     ("2.0") and spends nothing.
//
// Which fields are objects, and which are the wrappers of a connection,
// the simulator reads from the query's shape, having no schema: a field
// with a selection set is an object, one with a first or last argument is
// a connection, and edges, node and nodes inside a connection (and its
// pageInfo) cost nothing of their own: their nodes are what the page size
// counts. Page sizes must be 1 to 250, given literally or by a variable
// (given, or its default); fragments and inline fragments are counted as
// selected, directives are not evaluated.
package shopsim

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/graphql"
)

// Documented defaults.
const (
	DefaultPoints   = 1000 // points a bucket holds
	DefaultRestore  = 50   // points restored a second
	DefaultRequests = 40   // REST requests a bucket holds
	DefaultLeak     = 2    // REST requests leaked a second
	MaxQueryCost    = 1000 // the most points one query may request
	MaxPage         = 250  // the largest first or last
	mutationCost    = 10
)

// Config configures a Server; zero values mean Shopify's documented
// smallest buckets.
type Config struct {
	Points, Restore float64 // the GraphQL bucket
	Requests, Leak  float64 // the REST bucket
	// Items caps the nodes a connection returns, for the actual cost; 0
	// means full pages.
	Items int64
	// Shop, when set, is every request's shop, whatever its host.
	Shop string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Stats count what the server answered.
type Stats struct {
	Queries   int64   // GraphQL queries run
	Throttled int64   // GraphQL queries answered THROTTLED
	Rejected  int64   // GraphQL requests refused otherwise (syntax, cost, variables)
	Points    int64   // actual points spent by the queries run
	REST      int64   // REST requests served
	REST429   int64   // REST requests answered 429
	Lowest    float64 // the least the GraphQL bucket held after a deduction
	Unauth    int64   // requests without a token
}

// Server is a simulated Shopify; it is an http.Handler, safe for
// concurrent use.
type Server struct {
	cfg   Config
	mu    sync.Mutex
	stats Stats
	apps  map[string]*app // by shop and token
}

// app is one app's buckets on one shop.
type app struct {
	points, requests float64   // what the GraphQL bucket holds; what the REST bucket holds of requests
	pointsAt, restAt time.Time // when they were last brought up to date
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Points == 0 {
		cfg.Points = DefaultPoints
	}
	if cfg.Restore == 0 {
		cfg.Restore = DefaultRestore
	}
	if cfg.Requests == 0 {
		cfg.Requests = DefaultRequests
	}
	if cfg.Leak == 0 {
		cfg.Leak = DefaultLeak
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, apps: make(map[string]*app), stats: Stats{Lowest: cfg.Points}}
}

// Stats returns what the server answered so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// appOf returns the app of a request, its buckets brought up to now.
func (s *Server) appOf(r *http.Request, now time.Time) *app {
	shop := s.cfg.Shop
	if shop == "" {
		shop = r.Host
		if h, _, err := net.SplitHostPort(shop); err == nil {
			shop = h
		}
	}
	key := shop + "\x00" + r.Header.Get("X-Shopify-Access-Token")
	a := s.apps[key]
	if a == nil {
		a = &app{points: s.cfg.Points, pointsAt: now, restAt: now}
		s.apps[key] = a
	}
	a.points = min(s.cfg.Points, a.points+s.cfg.Restore*now.Sub(a.pointsAt).Seconds())
	a.pointsAt = now
	a.requests = max(0, a.requests-s.cfg.Leak*now.Sub(a.restAt).Seconds())
	a.restAt = now
	return a
}

// ServeHTTP answers a request of the Admin API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Shopify-Access-Token") == "" {
		s.mu.Lock()
		s.stats.Unauth++
		s.mu.Unlock()
		http.Error(w, `{"errors":"[API] Invalid API key or access token (unrecognized login or wrong password)"}`, http.StatusUnauthorized)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/admin/") {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/graphql.json") {
		s.serveGraphQL(w, r)
		return
	}
	s.serveREST(w, r)
}

// serveREST answers a REST request from the app's bucket of requests.
func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	a := s.appOf(r, s.cfg.Now())
	if a.requests+1 > s.cfg.Requests {
		wait := (a.requests + 1 - s.cfg.Requests) / s.cfg.Leak
		s.stats.REST429++
		level := a.requests
		s.mu.Unlock()
		w.Header().Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", int64(math.Ceil(level)), int64(s.cfg.Requests)))
		w.Header().Set("Retry-After", fmt.Sprintf("%.1f", math.Max(math.Ceil(wait*10)/10, 0.1)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`))
		return
	}
	a.requests++
	s.stats.REST++
	level := a.requests
	s.mu.Unlock()
	w.Header().Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", int64(math.Ceil(level)), int64(s.cfg.Requests)))
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"shop":{"id":1}}`))
}

// request is a GraphQL request's body.
type request struct {
	Query         string                     `json:"query"`
	Variables     map[string]json.RawMessage `json:"variables"`
	OperationName string                     `json:"operationName"`
}

// answerError is one of an answer's errors.
type answerError struct {
	Message    string            `json:"message"`
	Extensions map[string]string `json:"extensions,omitempty"`
}

// serveGraphQL prices a query, takes its requested cost from the bucket,
// and gives back what it did not spend.
func (s *Server) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	var in request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&in); err != nil || in.Query == "" {
		s.reject(w, http.StatusBadRequest, nil, answerError{Message: "Bad Request: the body is not a GraphQL request"})
		return
	}
	requested, actual, err := Price(in.Query, in.OperationName, in.Variables, s.cfg.Items)
	if err != nil {
		s.reject(w, http.StatusOK, nil, answerError{Message: err.Error(), Extensions: map[string]string{"code": "BAD_REQUEST"}})
		return
	}
	s.mu.Lock()
	a := s.appOf(r, s.cfg.Now())
	cost := map[string]any{"requestedQueryCost": requested, "actualQueryCost": nil}
	if requested > MaxQueryCost {
		status := s.throttleStatus(a)
		s.mu.Unlock()
		cost["throttleStatus"] = status
		s.reject(w, http.StatusOK, cost, answerError{
			Message:    fmt.Sprintf("Query cost is %d, which exceeds the single query max cost limit (%d).", requested, MaxQueryCost),
			Extensions: map[string]string{"code": "MAX_COST_EXCEEDED"}})
		return
	}
	if a.points < float64(requested) {
		s.stats.Throttled++
		status := s.throttleStatus(a)
		s.mu.Unlock()
		cost["throttleStatus"] = status
		s.answer(w, map[string]any{
			"errors":     []answerError{{Message: "Throttled", Extensions: map[string]string{"code": "THROTTLED"}}},
			"extensions": map[string]any{"cost": cost},
		})
		return
	}
	a.points -= float64(requested)
	s.stats.Lowest = min(s.stats.Lowest, a.points)
	a.points += float64(requested - actual)
	s.stats.Queries++
	s.stats.Points += actual
	cost["actualQueryCost"] = actual
	cost["throttleStatus"] = s.throttleStatus(a)
	s.mu.Unlock()
	s.answer(w, map[string]any{"data": map[string]any{}, "extensions": map[string]any{"cost": cost}})
}

// throttleStatus is what extensions.cost.throttleStatus says of a's bucket.
func (s *Server) throttleStatus(a *app) map[string]any {
	return map[string]any{"maximumAvailable": s.cfg.Points, "currentlyAvailable": math.Floor(a.points), "restoreRate": s.cfg.Restore}
}

// reject answers a request refused before it ran.
func (s *Server) reject(w http.ResponseWriter, status int, cost map[string]any, e answerError) {
	s.mu.Lock()
	s.stats.Rejected++
	s.mu.Unlock()
	body := map[string]any{"errors": []answerError{e}}
	if cost != nil {
		body["extensions"] = map[string]any{"cost": cost}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// answer writes a 200 answer.
func (s *Server) answer(w http.ResponseWriter, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// maxNesting bounds how deep pricing goes through selections and
// fragments.
const maxNesting = 4 * graphql.MaxDepth

// Price returns a query's requested cost and its actual cost when a
// connection returns at most items nodes (0: full pages), as the server
// counts them, or the error Shopify answers for a query it refuses before
// pricing: a syntax error, an operation it lacks, a page size it does not
// allow, a variable it needs and is not given, fragments spread in a
// cycle. A requested cost above MaxQueryCost is not an error here.
func Price(query, operation string, variables map[string]json.RawMessage, items int64) (requested, actual int64, err error) {
	doc, err := graphql.Parse(query)
	if err != nil {
		return 0, 0, err
	}
	var op *graphql.Operation
	for _, o := range doc.Operations {
		if o.Name == operation || operation == "" && len(doc.Operations) == 1 {
			op = o
		}
	}
	if op == nil {
		return 0, 0, fmt.Errorf("no operation named %q", operation)
	}
	p := &pricer{doc: doc, op: op, vars: variables}
	if requested, err = p.cost(op.Selections, op.Type == "mutation", false, 0); err != nil {
		return 0, 0, err
	}
	p.items, p.steps = items, 0
	actual, _ = p.cost(op.Selections, op.Type == "mutation", false, 0)
	return requested, actual, nil
}

// pricer prices one operation.
type pricer struct {
	doc   *graphql.Document
	op    *graphql.Operation
	vars  map[string]json.RawMessage
	items int64 // nodes a connection returns at most; 0: its page size
	steps int   // selections walked, fragments' included
}

// maxSteps bounds the selections one query may walk, each fragment
// counted every time it is spread, so that a document of small size
// cannot cost exponential work.
const maxSteps = 100_000

// saturate bounds counts far beyond any limit, so that they never
// overflow.
const saturate = 1 << 40

// cost returns the cost of a selection set: top marks the top level of a
// mutation, inConnection a connection's own selection set (whose edges,
// node, nodes and pageInfo are wrappers).
func (p *pricer) cost(sels []graphql.Selection, top, inConnection bool, depth int) (int64, error) {
	if depth > maxNesting {
		return 0, fmt.Errorf("the query nests deeper than %d", maxNesting)
	}
	if p.steps += len(sels); p.steps > maxSteps {
		return 0, fmt.Errorf("the query selects more than %d fields, fragments included", maxSteps)
	}
	var sum int64
	for _, s := range sels {
		var c int64
		var err error
		switch {
		case s.Spread != "":
			f := p.doc.Fragments[s.Spread]
			if f == nil {
				return 0, fmt.Errorf("fragment %q is not defined", s.Spread)
			}
			c, err = p.cost(f.Selections, top, inConnection, depth+1)
		case s.Inline:
			c, err = p.cost(s.Selections, top, inConnection, depth+1)
		case top:
			c = mutationCost
		case s.Selections == nil:
			c = 0 // a scalar or an enum
		default:
			c, err = p.field(s, inConnection, depth)
		}
		if err != nil {
			return 0, err
		}
		sum = min(sum+c, saturate)
	}
	return sum, nil
}

// field returns the cost of a field with a selection set.
func (p *pricer) field(s graphql.Selection, inConnection bool, depth int) (int64, error) {
	page, ok, err := p.page(s.Arguments)
	if err != nil {
		return 0, err
	}
	if ok {
		node, err := p.cost(s.Selections, false, true, depth+1)
		if err != nil {
			return 0, err
		}
		n := page
		if p.items > 0 {
			n = min(n, p.items)
		}
		return min(2+n*node, saturate), nil
	}
	switch {
	case inConnection && s.Name == "edges":
		return p.cost(s.Selections, false, true, depth+1)
	case inConnection && (s.Name == "node" || s.Name == "nodes"):
		c, err := p.cost(s.Selections, false, false, depth+1)
		return min(1+c, saturate), err // the node is an object
	case inConnection && s.Name == "pageInfo":
		return 0, nil
	}
	c, err := p.cost(s.Selections, false, false, depth+1)
	return min(1+c, saturate), err
}

// page returns a field's page size (first or last), and whether it has
// one.
func (p *pricer) page(args map[string]graphql.Value) (int64, bool, error) {
	var size int64
	found := false
	for _, name := range []string{"first", "last"} {
		v, ok := args[name]
		if !ok {
			continue
		}
		n, err := p.intOf(v)
		if err != nil {
			return 0, false, fmt.Errorf("argument %s: %w", name, err)
		}
		if n < 1 || n > MaxPage {
			return 0, false, fmt.Errorf("argument %s is %d; it must be 1 to %d", name, n, MaxPage)
		}
		size, found = max(size, n), true
	}
	return size, found, nil
}

// intOf returns the integer a value gives.
func (p *pricer) intOf(v graphql.Value) (int64, error) {
	text := v.Text
	if v.Kind == graphql.Variable {
		raw, ok := p.vars[v.Text]
		if ok && string(raw) != "null" {
			var n int64
			if err := json.Unmarshal(raw, &n); err != nil {
				return 0, fmt.Errorf("variable $%s is not an integer", v.Text)
			}
			return n, nil
		}
		d, ok := p.op.Defaults[v.Text]
		if !ok {
			return 0, fmt.Errorf("variable $%s is not given", v.Text)
		}
		v, text = d, d.Text
	}
	if v.Kind != graphql.Int {
		return 0, fmt.Errorf("%q is not an integer", text)
	}
	var n int64
	if _, err := fmt.Sscan(text, &n); err != nil {
		return 0, fmt.Errorf("%q is not an integer", text)
	}
	return n, nil
}
