// Package costs maps outgoing HTTP requests to what they cost: an endpoint
// name and the units each quota bucket is charged.
//
// Begin with [New] on a [Spec] written in Go, or [Load] and [LoadFile] for
// JSON; the package's Example builds a table and resolves requests with it.
// The table goes to tollgate.New in tollgate.Config.Costs. The providers
// bring their own, data you can override: youtube.Classic and
// youtube.Granular (providers/youtube), github.Table (providers/github),
// openai.Table (providers/openai), gemini.Table (providers/gemini),
// anthropic.Table (providers/anthropic).
//
// A [Table] is built from a [Spec]: data that a JSON file holds or Go code
// writes. Rules match requests with the pattern syntax of [net/http.ServeMux]
// ("GET youtube.googleapis.com/youtube/v3/search"), and matching is done by a
// ServeMux, so the most specific pattern wins exactly as it does in a server.
// A rule charges fixed units, or computes its charges from the request for
// providers whose cost depends on parameters. A rule may mark its requests
// free (they reserve nothing), or as continuing a session already paid for
// (free, and never paused), and may say where the response tells the true
// cost of an estimated charge. A request no rule matches gets the table's
// default charge, or [ErrUnknownEndpoint] when the table has none, so that
// nothing is sent unmetered by accident.
//
// A Table is immutable and safe for concurrent use.
package costs

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// maxUnits is the largest number of units one charge may carry: the
// largest limit the quota engine accepts (quota.MaxUnits).
const maxUnits = 1 << 50

// ErrUnknownEndpoint is returned by Resolve for a request that no rule
// matches, in a table without a default.
var ErrUnknownEndpoint = errors.New("costs: unknown endpoint")

// ErrInvalid matches every error about a spec that cannot be loaded, and
// about charges a rule's func computed that cannot be used.
var ErrInvalid = errors.New("costs: invalid table")

// A Charge is units spent from one bucket of a quota, e.g. 100 units of "pool".
type Charge struct {
	Bucket string `json:"bucket"`
	Units  int64  `json:"units"`
}

// An Endpoint is what a request resolved to.
type Endpoint struct {
	// Name identifies the endpoint in policies, hooks and errors, e.g.
	// "search.list".
	Name string
	// Charges are the units it spends, at most one per bucket; none, or
	// zero units, for a free endpoint.
	Charges []Charge
	// Free reports requests that cost nothing (Rule.Free): they reserve
	// no units.
	Free bool
	// Continues reports requests that continue a session an earlier
	// request paid for (Rule.Continues): free, and never paused.
	Continues bool
	// Settle says where the response tells the true cost of some charges
	// (Rule.Settle).
	Settle []Settle
}

// Units returns the units the endpoint spends across all its buckets,
// e.g. 101 for a call charged 100 to one bucket and 1 to another.
func (e Endpoint) Units() int64 {
	var n int64
	for _, c := range e.Charges {
		n += c.Units
	}
	return n
}

// A Settle says where a response tells a request's true cost in one of
// the buckets its rule charges: in a header, or as a number in its JSON
// body; in a stream of server-sent events, in the last event that holds
// it; or by its status alone. The rule's units are the estimate, charged
// when the request is admitted; the true cost replaces it once the body
// is read to its end or closed (at once, for a header or a status). A
// response that does not tell (an error, no such field, a body closed
// early) keeps the estimate.
//
// A bucket is read from one header or field, and may besides have a cost
// for each of some statuses: a response with such a status settles to it,
// whatever the header or field say.
type Settle struct {
	// Bucket is the charge settled, e.g. "tokens".
	Bucket string `json:"bucket"`
	// Header names a response header whose value is the true cost, e.g.
	// "X-Query-Cost". It is read before Field.
	Header string `json:"header,omitempty"`
	// Field is a dotted path to a number in the JSON body, e.g.
	// "usage.output_tokens" or "extensions.cost.actualQueryCost".
	Field string `json:"field,omitempty"`
	// Status, when set (without Header or Field), settles the charge to
	// Units when the response has this status: e.g. 304, with Units 0, for
	// GitHub's conditional requests answered Not Modified, which cost no
	// primary quota.
	Status int `json:"status,omitempty"`
	// Units is the true cost of a response with Status, e.g. 0.
	Units int64 `json:"units,omitempty"`
}

// A Rule gives the cost of the requests its pattern matches.
type Rule struct {
	// Pattern is a ServeMux pattern: an optional method, an optional host,
	// and a path, e.g. "GET youtube.googleapis.com/youtube/v3/search".
	// Patterns are matched against the request's method, its URL's host (or
	// Host header) with any port removed, and its path; the query is not
	// part of matching. The method is one of GET, HEAD, POST, PUT, PATCH,
	// DELETE and OPTIONS (any other needs CustomMethod); the host, when
	// given, is a name with a dot, an address, or localhost, so that a
	// path missing its leading "/" ("GET v1/items") is an error, not a
	// host named "v1".
	Pattern string `json:"pattern"`
	// CustomMethod accepts a method in Pattern outside the standard ones,
	// for an upstream that uses one, e.g. "PROPFIND". Without it such a
	// method is refused as a likely typo ("GTE").
	CustomMethod bool `json:"custom_method,omitempty"`
	// Endpoint names what the pattern matches, e.g. "search.list". Several
	// rules may share a name, e.g. the same method on two hosts.
	Endpoint string `json:"endpoint"`
	// Charges are the units a matching request spends, one per bucket: at
	// least one, each positive, unless the rule is free.
	Charges []Charge `json:"charges,omitempty"`
	// Free marks requests that cost nothing: they reserve no units. Charges
	// may still name, with zero units, buckets whose concurrency caps they
	// occupy. Free is a marker: charges that come to 0 are an error.
	Free bool `json:"free,omitempty"`
	// Continues marks requests that continue a session an earlier request
	// paid for, such as the chunks of a resumable upload: free, and never
	// paused, since stopping them would waste what was paid.
	Continues bool `json:"continues,omitempty"`
	// Settle says, per bucket, where the response tells the true cost:
	// Charges are then the estimate, e.g. max_tokens.
	Settle []Settle `json:"settle,omitempty"`
	// Func, when set, computes the request's endpoint instead of the fields
	// above: its charges, Free, Continues and Settle, and its name (the
	// rule's Endpoint when empty). The result is checked as a rule is, on
	// every call. It cannot be written in JSON.
	Func func(*http.Request) (Endpoint, error) `json:"-"`
}

// A Spec is a cost table as data.
type Spec struct {
	// Buckets names every bucket the rules may charge, e.g. ["pool",
	// "search"]. A charge to any other bucket is an error when loading.
	Buckets []string `json:"buckets"`
	// Rules map request patterns to their cost.
	Rules []Rule `json:"rules"`
	// Catalog marks a table that lists every endpoint of an API, many of
	// which a program may never call, such as the providers' tables:
	// tollgate.New then lets a rule charge more than a limit of its bucket
	// admits (each such request fails when it is made), where for any
	// other table it refuses the configuration.
	Catalog bool `json:"catalog,omitempty"`
	// Default, when set, is the cost of a request no rule matches; its
	// Pattern is ignored. When nil, such a request fails with
	// ErrUnknownEndpoint.
	Default *Rule `json:"default,omitempty"`
}

// Override returns a copy of s in which every rule named endpoint charges
// charges instead (and loses any Func, is no longer free, and no longer
// settles buckets it stops charging). It fails when no rule has that
// name. The copy is validated when compiled.
func (s Spec) Override(endpoint string, charges ...Charge) (Spec, error) {
	out := s.clone()
	found := false
	for i := range out.Rules {
		r := &out.Rules[i]
		if r.Endpoint == endpoint {
			r.Charges = slices.Clone(charges)
			r.Func = nil
			r.Free, r.Continues = false, false
			r.Settle = slices.DeleteFunc(r.Settle, func(st Settle) bool {
				return !slices.ContainsFunc(charges, func(c Charge) bool { return c.Bucket == st.Bucket })
			})
			found = true
		}
	}
	if !found {
		return s, fmt.Errorf("costs: override: no rule for endpoint %q", endpoint)
	}
	return out, nil
}

// clone copies the spec deeply enough that changing the copy's rules and
// charges leaves s as it was.
func (s Spec) clone() Spec {
	out := Spec{Buckets: slices.Clone(s.Buckets), Rules: slices.Clone(s.Rules), Catalog: s.Catalog}
	for i := range out.Rules {
		out.Rules[i].Charges = slices.Clone(out.Rules[i].Charges)
		out.Rules[i].Settle = slices.Clone(out.Rules[i].Settle)
	}
	if s.Default != nil {
		d := *s.Default
		d.Charges = slices.Clone(d.Charges)
		d.Settle = slices.Clone(d.Settle)
		out.Default = &d
	}
	return out
}

// A Table resolves requests to endpoints and charges. Build one with New,
// Load or LoadFile.
type Table struct {
	spec    Spec
	buckets map[string]bool
	mux     *http.ServeMux
	byPat   map[string]*Rule
	index   map[*Rule]int // a rule's place in the spec, for errors
}

// ruleHandler marks a rule in the ServeMux; it is never served.
type ruleHandler struct{ rule *Rule }

func (ruleHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// New checks spec and builds its table. Errors match ErrInvalid and name the
// offending rule: a bad or duplicate pattern, a missing endpoint name, no
// charges, units that are not positive (zero, for a free rule) or too
// large, an undeclared bucket, a bucket charged twice, a settle spec that
// reads nothing or settles a bucket the rule does not charge.
func New(spec Spec) (*Table, error) {
	spec = spec.clone()
	t := &Table{
		spec:    spec,
		buckets: make(map[string]bool, len(spec.Buckets)),
		mux:     http.NewServeMux(),
		byPat:   make(map[string]*Rule, len(spec.Rules)),
		index:   make(map[*Rule]int, len(spec.Rules)),
	}
	for _, b := range spec.Buckets {
		if b == "" {
			return nil, invalidf("bucket names must not be empty")
		}
		if t.buckets[b] {
			return nil, invalidf("bucket %q is declared twice", b)
		}
		t.buckets[b] = true
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		where := fmt.Sprintf("rule %d (%q)", i, r.Pattern)
		if r.Endpoint == "" {
			return nil, invalidf("%s: no endpoint name", where)
		}
		if err := checkPattern(r.Pattern, r.CustomMethod); err != nil {
			return nil, invalidf("%s: %v", where, err)
		}
		if r.Func == nil {
			if err := t.check(r.endpoint()); err != nil {
				return nil, invalidf("%s: %v", where, err)
			}
		}
		if err := register(t.mux, r); err != nil {
			return nil, invalidf("%s: %v", where, t.conflict(err))
		}
		t.byPat[r.Pattern] = r
		t.index[r] = i
	}
	if d := spec.Default; d != nil {
		if d.Endpoint == "" {
			return nil, invalidf("default rule: no endpoint name")
		}
		if d.Func == nil {
			if err := t.check(d.endpoint()); err != nil {
				return nil, invalidf("default rule: %v", err)
			}
		}
	}
	return t, nil
}

// register adds the rule's pattern to the mux. ServeMux reports a bad or
// conflicting pattern by panicking; this turns that into an error.
func register(mux *http.ServeMux, r *Rule) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	if r.Pattern == "" {
		return errors.New("empty pattern")
	}
	mux.Handle(r.Pattern, ruleHandler{r})
	return nil
}

// standardMethods are the methods a pattern may name without
// Rule.CustomMethod.
var standardMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// checkPattern refuses what ServeMux accepts but a cost table almost
// certainly does not mean: a method outside the standard ones (unless
// custom is set), and a host that is no host name, which is what a path
// written without its leading "/" becomes. ServeMux checks the rest.
func checkPattern(pattern string, custom bool) error {
	rest := pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		method := pattern[:i]
		rest = strings.TrimLeft(pattern[i:], " \t")
		if !custom && !slices.Contains(standardMethods, method) {
			return fmt.Errorf("method %q is not one of %s (set custom_method, Rule.CustomMethod, for a method the upstream really uses)",
				method, strings.Join(standardMethods, ", "))
		}
	}
	host, _, found := strings.Cut(rest, "/")
	if !found || host == "" {
		return nil // no host, or no path: ServeMux says what is wrong
	}
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("%q is not a host name (no dot, no port, not localhost): a path starts with \"/\", e.g. %q", host, "/"+rest)
	}
	return nil
}

// registeredAt matches what ServeMux adds to a pattern in its messages:
// the source line that registered it, which is costs.go's, not the user's.
var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

// conflict rewrites ServeMux's message about two conflicting patterns in
// the table's terms: the rule already registered, by its place in the
// spec, and no source paths.
func (t *Table) conflict(err error) error {
	msg := registeredAt.ReplaceAllString(err.Error(), "")
	other, reason, ok := strings.Cut(msg, ":\n")
	if !ok {
		return errors.New(msg)
	}
	const with = " conflicts with pattern "
	i := strings.Index(other, with)
	if i < 0 {
		return errors.New(msg)
	}
	pattern, err := strconv.Unquote(other[i+len(with):])
	if r, found := t.byPat[pattern]; err == nil && found {
		return fmt.Errorf("conflicts with rule %d (%q): %s", t.index[r], pattern, reason)
	}
	return errors.New(strings.ReplaceAll(msg, "\n", " "))
}

// endpoint is what the rule's fields say a request resolves to.
func (r *Rule) endpoint() Endpoint {
	return Endpoint{Name: r.Endpoint, Charges: r.Charges, Free: r.Free || r.Continues, Continues: r.Continues, Settle: r.Settle}
}

// check reports why an endpoint cannot be used: charges to undeclared or
// repeated buckets, units that are not positive (or, for a free endpoint,
// not zero) or too large, settle specs for buckets it does not charge.
func (t *Table) check(e Endpoint) error {
	if e.Continues && !e.Free {
		return errors.New("a continuation is free: Continues needs Free")
	}
	if len(e.Charges) == 0 && !e.Free {
		return errors.New("no charges")
	}
	seen := make(map[string]bool, len(e.Charges))
	for _, c := range e.Charges {
		switch {
		case !t.buckets[c.Bucket]:
			return fmt.Errorf("bucket %q is not declared in buckets %q", c.Bucket, t.spec.Buckets)
		case seen[c.Bucket]:
			return fmt.Errorf("bucket %q is charged twice", c.Bucket)
		case e.Free && c.Units != 0:
			return fmt.Errorf("bucket %q: a free request charges 0 units, not %d", c.Bucket, c.Units)
		case !e.Free && c.Units <= 0:
			return fmt.Errorf("bucket %q: units must be positive, got %d", c.Bucket, c.Units)
		case c.Units > maxUnits:
			return fmt.Errorf("bucket %q: %d units overflow the limit of %d", c.Bucket, c.Units, int64(maxUnits))
		}
		seen[c.Bucket] = true
	}
	type settledBy struct {
		bucket string
		status int // 0: a header or a field
	}
	settled := make(map[settledBy]bool, len(e.Settle))
	for _, st := range e.Settle {
		by := settledBy{st.Bucket, st.Status}
		switch {
		case e.Free:
			return errors.New("a free request has no cost to settle")
		case !seen[st.Bucket]:
			return fmt.Errorf("settle: bucket %q is not one the rule charges", st.Bucket)
		case settled[by] && st.Status != 0:
			return fmt.Errorf("settle: bucket %q is settled twice for status %d", st.Bucket, st.Status)
		case settled[by]:
			return fmt.Errorf("settle: bucket %q is settled twice", st.Bucket)
		case st.Status != 0 && (st.Status < 100 || st.Status > 599):
			return fmt.Errorf("settle: bucket %q: %d is not an HTTP status", st.Bucket, st.Status)
		case st.Status != 0 && (st.Header != "" || st.Field != ""):
			return fmt.Errorf("settle: bucket %q: a status's cost is its Units, not a header's or a field's", st.Bucket)
		case st.Status != 0 && (st.Units < 0 || st.Units > maxUnits):
			return fmt.Errorf("settle: bucket %q: status %d: units must be from 0 to %d, got %d", st.Bucket, st.Status, int64(maxUnits), st.Units)
		case st.Status != 0:
			settled[by] = true
			continue
		case st.Units != 0:
			return fmt.Errorf("settle: bucket %q: units %d without a status", st.Bucket, st.Units)
		case st.Header == "" && st.Field == "":
			return fmt.Errorf("settle: bucket %q: neither a header nor a field to read, nor a status", st.Bucket)
		case st.Header != "" && !validHeader(st.Header):
			return fmt.Errorf("settle: bucket %q: %q is not a header name", st.Bucket, st.Header)
		case st.Field != "" && !validField(st.Field):
			return fmt.Errorf("settle: bucket %q: %q is not a dotted path of field names", st.Bucket, st.Field)
		}
		settled[by] = true
	}
	return nil
}

// validHeader reports whether name is an HTTP header name (an RFC 9110
// token).
func validHeader(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}

// validField reports whether path is field names joined by dots, none
// empty.
func validField(path string) bool {
	if path == "" || len(path) > 256 {
		return false
	}
	for _, name := range strings.Split(path, ".") {
		if name == "" {
			return false
		}
	}
	return true
}

// Spec returns a copy of the spec the table was built from.
func (t *Table) Spec() Spec { return t.spec.clone() }

// Buckets returns the names of the table's buckets.
func (t *Table) Buckets() []string { return slices.Clone(t.spec.Buckets) }

// Resolve returns the endpoint a request calls and what it costs. It fails
// with ErrUnknownEndpoint when no rule matches and the table has no
// default, and with an error matching ErrInvalid when a rule's Func fails or
// computes an endpoint that cannot be used.
func (t *Table) Resolve(req *http.Request) (Endpoint, error) {
	rule := t.match(req)
	if rule == nil {
		rule = t.spec.Default
	}
	if rule == nil {
		return Endpoint{}, &UnknownError{Method: req.Method, Host: host(req), Path: req.URL.Path}
	}
	if rule.Func == nil {
		return rule.endpoint(), nil
	}
	e, err := rule.Func(req)
	if err != nil {
		return Endpoint{}, fmt.Errorf("costs: endpoint %q: %w", rule.Endpoint, err)
	}
	if e.Name == "" {
		e.Name = rule.Endpoint
	}
	e.Free = e.Free || e.Continues
	if err := t.check(e); err != nil {
		return Endpoint{}, invalidf("endpoint %q: computed: %v", e.Name, err)
	}
	return e, nil
}

// match finds the rule whose pattern the mux picks for the request, or nil.
func (t *Table) match(req *http.Request) *Rule {
	if req.URL == nil {
		return nil
	}
	probe := req
	if req.Host == "" || req.Method == "" {
		// The mux reads the Host field, which client requests may leave to
		// the URL, and the method, which may be left to mean GET.
		probe = &http.Request{Method: req.Method, Host: host(req), URL: req.URL}
		if probe.Method == "" {
			probe.Method = http.MethodGet
		}
	}
	h, pattern := t.mux.Handler(probe)
	if rh, ok := h.(ruleHandler); ok {
		return rh.rule
	}
	// The mux answers an unclean path ("/a//b") with a redirect, naming the
	// pattern the clean path matches; charge that rule.
	return t.byPat[pattern]
}

// host is the host a client request goes to: its Host header when set,
// else its URL's.
func host(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	if req.URL != nil {
		return req.URL.Host
	}
	return ""
}

// UnknownError reports a request that no rule matches. It matches
// ErrUnknownEndpoint. The query is left out: it may hold credentials.
type UnknownError struct {
	Method, Host, Path string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("costs: unknown endpoint: %s %s%s", e.Method, e.Host, e.Path)
}

// Is reports whether target is ErrUnknownEndpoint.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknownEndpoint }

// invalidError is a spec or charge problem; it matches ErrInvalid.
type invalidError struct{ msg string }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: "costs: " + fmt.Sprintf(format, args...)}
}

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }
