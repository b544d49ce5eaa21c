package gemini

import (
	"net/http"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/header"
	"github.com/tollgate/tollgate/internal/provider"
)

// Gemini's limits belong to the project: "Rate limits are applied per
// project, not per API key" (rate limits,
// https://ai.google.dev/gemini-api/docs/rate-limits), and to each model. A
// request names neither its project nor anything of it but its key, which
// the Go SDK sends in X-Goog-Api-Key, and REST examples as key=. So a
// request's project is a hash of its key, unless Options.Tollgate.Scope
// names it (as it must for several keys of one project), and its scope is
// the project and the model: "cred-3f1c.../gemini-2.5-flash".

// noKey is the project of requests that carry no key (an OAuth token's
// are scoped by the token).
const noKey = "no-key"

// credentialOf returns the key of a request: X-Goog-Api-Key, key=, or an
// OAuth bearer token; "" when it carries none.
func credentialOf(req *http.Request) string {
	if k := req.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if k := req.URL.Query().Get("key"); k != "" {
		return k
	}
	return header.Bearer(req)
}

// project names the project of a key: a hash, so that no scope, key, log
// line or error shows the key.
func project(key string) string {
	if key == "" {
		return noKey
	}
	return tollgate.HashCredential(key)
}

// projectOf names the project of a request.
func projectOf(req *http.Request) string { return project(credentialOf(req)) }

// Scope returns the scope NewTransport's Transport charges the requests
// of a key to a model, e.g. for Transport.Usage: "cred-" and a hash, "/",
// the model. A Transport whose Options.Tollgate.Scope names projects puts
// that name before the "/". The free requests (countTokens, listing
// models) are charged to the project alone.
func Scope(key, model string) string { return scopeName(project(key), model) }

// scopeName joins a project and a model.
func scopeName(project, model string) string {
	return project + "/" + modelName(modelKey(model))
}

// modelName returns a model's name as scopes, logs and errors show it:
// as it is when it is a short name of letters, digits and . _ -
// ("gemini-2.5-flash"), "model-" and a hash otherwise (provider.Name).
func modelName(m string) string { return provider.Name(m, "._-", "model-") }
