package gateway

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// A router finds a request's upstream by the longest prefix of its path.
type router struct {
	routes []route // longest prefix first
}

// route is one upstream's prefix and target.
type route struct {
	prefix string
	target *url.URL
	up     *upstream
}

// newRouter sorts the routes, longest prefix first.
func newRouter(routes []route) *router {
	slices.SortStableFunc(routes, func(a, b route) int { return len(b.prefix) - len(a.prefix) })
	return &router{routes: routes}
}

// Reasons a path is not routed.
var (
	// errNoRoute: no prefix matches; the answer is 404.
	errNoRoute = errors.New("no upstream is served under this path")
	// errBadPath: the path has dot segments, or is not a path at all; the
	// answer is 400.
	errBadPath = errors.New("the path has dot segments (\".\", \"..\") or is not an absolute path")
)

// match routes an escaped path (url.URL.EscapedPath): the route, and the
// outgoing URL's path, escaped and not, for target's path joined to the
// rest of the path by exactly one "/". A path with a "." or ".." segment,
// also percent-encoded or behind an encoded slash or backslash, is
// refused whatever its prefix: cleaning it could move it under another
// prefix or out of the target's path.
func (r *router) match(escaped string) (*route, string, string, error) {
	if !strings.HasPrefix(escaped, "/") {
		return nil, "", "", errBadPath
	}
	if hasDotSegment(escaped) {
		return nil, "", "", errBadPath
	}
	for i := range r.routes {
		rt := &r.routes[i]
		rest, ok := strings.CutPrefix(escaped, rt.prefix)
		if !ok {
			continue
		}
		out := strings.TrimRight(rt.target.EscapedPath(), "/") + "/" + strings.TrimLeft(rest, "/")
		plain, err := url.PathUnescape(out)
		if err != nil {
			return nil, "", "", errBadPath
		}
		return rt, out, plain, nil
	}
	return nil, "", "", errNoRoute
}

// hasDotSegment reports whether an escaped path has a segment that is, or
// once unescaped holds between slashes or backslashes, "." or "..".
func hasDotSegment(escaped string) bool {
	for seg := range strings.SplitSeq(escaped, "/") {
		plain := seg
		if strings.Contains(seg, "%") {
			var err error
			if plain, err = url.PathUnescape(seg); err != nil {
				return true // not a path a client means: refuse it
			}
		}
		for part := range strings.FieldsFuncSeq(plain, func(r rune) bool { return r == '/' || r == '\\' }) {
			if part == "." || part == ".." {
				return true
			}
		}
		if plain == "." || plain == ".." {
			return true
		}
	}
	return false
}

// withoutKey returns a raw query less its "key" parameters, and the
// values they had; every other parameter is kept as it was written.
func withoutKey(raw string) (string, []string) {
	if raw == "" || !strings.Contains(raw, "key") {
		return raw, nil
	}
	var kept []string
	var keys []string
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == "key" {
			v, err := url.QueryUnescape(value)
			if err != nil {
				v = value
			}
			keys = append(keys, v)
			continue
		}
		kept = append(kept, part)
	}
	return strings.Join(kept, "&"), keys
}
