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
	"fmt"
	"net/http"
	"slices"
)

// A Table resolves requests to endpoints and charges. Build one with New,
// Load or LoadFile.
type Table struct {
	spec    Spec
	buckets map[string]bool
	mux     *http.ServeMux
	byPat   map[string]*Rule
	index   map[*Rule]int // a rule's place in the spec, for errors
}

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

// Spec returns a copy of the spec the table was built from.
func (t *Table) Spec() Spec { return t.spec.clone() }

// Buckets returns the names of the table's buckets.
func (t *Table) Buckets() []string { return slices.Clone(t.spec.Buckets) }
