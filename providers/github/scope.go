package github

import (
	"net/http"
	"strings"

	"github.com/tollgate/tollgate"
)

// credential returns the secret a request is authorized by: the token of
// an "Authorization: Bearer" or "Authorization: token" header (GitHub
// takes both, so that a token sent either way is one credential), else
// the header's whole value (Basic: an OAuth app's client ID and secret, or
// a user's name and token, which GitHub counts per app or user); "" when
// the request carries none.
// https://docs.github.com/en/rest/authentication/authenticating-to-the-rest-api
//
// A header that names a scheme and no credential is none: go-github sends
// "Authorization: Bearer " when GITHUB_TOKEN is unset
// (client.WithAuthToken("")), and such requests share AnonymousScope, 60
// an hour, as GitHub counts them; so do an empty or blank header, "token "
// and "Basic ".
func credential(req *http.Request) string {
	h := strings.TrimSpace(req.Header.Get("Authorization"))
	scheme, rest := h, ""
	if i := strings.IndexAny(h, " \t"); i >= 0 {
		scheme, rest = h[:i], strings.TrimSpace(h[i+1:])
	}
	switch {
	case strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "token"):
		return rest
	case strings.EqualFold(scheme, "basic") && rest == "":
		return ""
	}
	return h
}

// scopeOf is the scope of a request: AnonymousScope without a credential,
// else the credential's hash (tollgate.HashCredential), which names it
// without revealing it.
func scopeOf(req *http.Request) string {
	if c := credential(req); c != "" {
		return tollgate.HashCredential(c)
	}
	return AnonymousScope
}
