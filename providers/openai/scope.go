package openai

import (
	"net/http"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/header"
	"github.com/tollgate/tollgate/internal/provider"
)

// OpenAI's limits belong to the organization, or the project, and vary by
// model: "Rate limits are defined at the organization level and at the
// project level, not user level. Rate limits vary by the model being
// used." (rate limits guide,
// https://developers.openai.com/api/docs/guides/rate-limits). A request
// names its organization and project with the OpenAI-Organization and
// OpenAI-Project headers, or leaves them to its key's defaults
// (https://platform.openai.com/docs/api-reference/authentication). So a
// request's scope is its pool (the key, organization and project, hashed
// together) and its model: "cred-3f1c.../gpt-4o-mini". Each model has its
// own Requests and Tokens buckets there.

// noKey is the pool of requests that carry no credential, e.g. to a vLLM
// server without authentication.
const noKey = "no-key"

// credentialOf returns the API key of a request: OpenAI's Authorization:
// Bearer, or Azure OpenAI's api-key header; "" when it carries neither.
func credentialOf(req *http.Request) string {
	if k := header.Bearer(req); k != "" {
		return k
	}
	return req.Header.Get("Api-Key")
}

// pool names the pool of a key, organization and project: a hash of the
// three, so that no scope, key, log line or error shows the key.
func pool(key, organization, project string) string {
	if key == "" && organization == "" && project == "" {
		return noKey
	}
	return tollgate.HashCredential(key + "\x00" + organization + "\x00" + project)
}

// poolOf names the pool of a request.
func poolOf(req *http.Request) string {
	return pool(credentialOf(req), req.Header.Get("OpenAI-Organization"), req.Header.Get("OpenAI-Project"))
}

// Scope returns the scope NewTransport's Transport charges the requests of
// a key, organization and project ("" when not sent) to a model, e.g. for
// Transport.Usage: "cred-" and a hash, "/", the model. A Transport whose
// Options.Tollgate.Scope names pools puts that name before the "/".
func Scope(key, organization, project, model string) string {
	return scopeName(pool(key, organization, project), model)
}

// scopeName joins a pool and a model; a request with no model spends the
// pool alone.
func scopeName(pool, model string) string {
	if model == "" {
		return pool
	}
	return pool + "/" + modelName(model)
}

// modelName returns a model's name as scopes, logs and errors show it:
// as it is when it is a short name of letters, digits and . _ - : / @ +
// (gpt-4o-mini, ft:gpt-4o-mini:acme::abc123, meta-llama/Llama-3.1-8B),
// "model-" and a hash otherwise (provider.Name).
func modelName(m string) string { return provider.Name(m, "._-:/@+", "model-") }
