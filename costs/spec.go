package costs

import (
	"fmt"
	"net/http"
	"slices"
)

// A Charge is units spent from one bucket of a quota, e.g. 100 units of "pool".
type Charge struct {
	Bucket string `json:"bucket"`
	Units  int64  `json:"units"`
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
