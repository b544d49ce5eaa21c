package costs

import (
	"fmt"
	"net/http"
)

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
