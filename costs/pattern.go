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

// ruleHandler marks a rule in the ServeMux; it is never served.
type ruleHandler struct{ rule *Rule }

func (ruleHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

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
// the source line that registered it, which is pattern.go's, not the user's.
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
