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
func credential(req *http.Request) string {
	if tok := tollgate.BearerToken(req); tok != "" {
		return tok
	}
	h := strings.TrimSpace(req.Header.Get("Authorization"))
	if len(h) > 6 && strings.EqualFold(h[:6], "token ") {
		return strings.TrimSpace(h[6:])
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
