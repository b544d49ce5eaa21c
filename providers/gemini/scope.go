package gemini

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/header"
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

// maxModelName bounds the model names kept as they are in scopes.
const maxModelName = 128

// modelName returns a model's name as scopes, logs and errors show it:
// as it is when it is a short name of letters, digits and . _ -
// ("gemini-2.5-flash"), "model-" and a hash otherwise, so that a hostile
// path cannot write what it likes into logs.
func modelName(m string) string {
	ok := len(m) <= maxModelName && m != ""
	for i := 0; ok && i < len(m); i++ {
		c := m[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if ok {
		return m
	}
	sum := sha256.Sum256([]byte(m))
	return "model-" + hex.EncodeToString(sum[:8])
}
