package tollgate

import "net/http"

// A Route is a way to serve a request when its own quota has no room, for
// endpoints whose policy is Failover: another quota pool with its own
// credential, or another transport such as a cache.
type Route struct {
	// Name identifies the route in hooks and logs, e.g. "project-b".
	Name string
	// Scope is the quota pool the route spends from, e.g. "project-b". An
	// empty Scope makes the route unmetered, for a Base that does not reach
	// the upstream's quota (a cache).
	Scope string
	// Rewrite, when set, adapts the request to the route, e.g. swaps in the
	// API key of Scope's project. It is called on a clone of the request.
	Rewrite func(*http.Request)
	// Base, when set, sends the route's requests instead of the
	// Transport's Base.
	Base http.RoundTripper
}
