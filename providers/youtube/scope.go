package youtube

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/tollgate/tollgate"
)

// keyHeader carries the API key without putting it in the URL, where error
// messages and access logs would show it.
const keyHeader = "X-Goog-Api-Key"

// keyOf returns the request's API key, or "".
func keyOf(req *http.Request) string {
	if k := req.Header.Get(keyHeader); k != "" {
		return k
	}
	return req.URL.Query().Get("key")
}

// setKey returns a rewrite that makes a request use key.
func setKey(key string) func(*http.Request) {
	return func(req *http.Request) {
		if req.URL.Query().Has("key") {
			q := req.URL.Query()
			q.Del("key")
			req.URL.RawQuery = q.Encode()
		}
		req.Header.Set(keyHeader, key)
	}
}

// projectScopes builds, from projects of keys, the scope of a request (its
// key's project; for a request without a key, tokenProject, else the only
// project), one failover route per project (in name order), and the key to send with
// requests that carry none. Keys are held by hash, so the map cannot show
// them.
func projectScopes(pools map[string][]string, tokenPool string) (tollgate.ScopeFunc, []tollgate.Route, string, error) {
	names := make([]string, 0, len(pools))
	for name := range pools {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, nil, "", errors.New("youtube: no projects")
	}
	byKey := make(map[string]string)
	var routes []tollgate.Route
	first := ""
	for _, name := range names {
		if name == "" {
			return nil, nil, "", errors.New("youtube: a project has an empty name")
		}
		for i, k := range pools[name] {
			if k == "" {
				return nil, nil, "", fmt.Errorf("youtube: project %q: key %d is empty", name, i)
			}
			h := tollgate.HashCredential(k)
			if other, dup := byKey[h]; dup {
				return nil, nil, "", fmt.Errorf("youtube: a key is in both projects %q and %q; a key belongs to one project", other, name)
			}
			byKey[h] = name
		}
		if keys := pools[name]; len(keys) > 0 {
			routes = append(routes, tollgate.Route{Name: name, Scope: name, Rewrite: setKey(keys[0])})
			if first == "" {
				first = keys[0]
			}
		}
	}
	sole := tokenPool
	if sole == "" && len(names) == 1 {
		sole = names[0]
	}
	scope := func(req *http.Request) (string, error) {
		k := keyOf(req)
		if k == "" || len(byKey) == 0 {
			if sole != "" {
				return sole, nil
			}
			return "", errors.New("youtube: the request carries no API key to find its project by (Options.TokenProject names the project of requests authorized by an OAuth token alone)")
		}
		if p, ok := byKey[tollgate.HashCredential(k)]; ok {
			return p, nil
		}
		return "", errors.New("youtube: the request's API key is in no project given to the transport (Options.Projects)")
	}
	return scope, routes, first, nil
}
