package anthropic

import (
	"net/http"
	"strings"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/header"
	"github.com/tollgate/tollgate/internal/provider"
)

// Anthropic's limits belong to the organization (and a workspace may have
// lower ones) and to a model class: "Rate limits are applied separately
// for each model" and some are shared by a family, "Opus rate limits are
// shared across Opus 4.x models", and likewise Sonnet 4.x (rate limits
// page, https://docs.anthropic.com/en/api/rate-limits). A request names its
// organization and workspace by its API key (x-api-key), so its scope is
// a hash of the key and its model class: "cred-3f1c.../claude-sonnet-4".
// Keys of one organization share its limits: name one pool for them with
// Options.Tollgate.Scope.

// noKey is the pool of requests that carry no credential.
const noKey = "no-key"

// credentialOf returns the API key of a request: x-api-key, or an
// Authorization: Bearer token (anthropic-sdk-go's WithAuthToken); "" when
// it carries neither.
func credentialOf(req *http.Request) string {
	if k := req.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return header.Bearer(req)
}

// pool names the pool of a key: a hash, so that no scope, key, log line
// or error shows the key.
func pool(key string) string {
	if key == "" {
		return noKey
	}
	return tollgate.HashCredential(key)
}

// ModelClass returns the class whose limits a model spends, as the rate
// limits page groups them: "claude-<family>-<major>" for the current
// models ("claude-opus-4-1-20250805" and "claude-opus-4-5" spend
// "claude-opus-4"; "claude-sonnet-4-5" spends "claude-sonnet-4";
// "claude-haiku-4-5" spends "claude-haiku-4"), the name without its date
// (or "-latest") for the older ones ("claude-3-5-haiku-20241022" spends
// "claude-3-5-haiku"), and any other name as it is.
func ModelClass(model string) string {
	parts := strings.Split(model, "-")
	if len(parts) >= 3 && parts[0] == "claude" && !digits(parts[1]) && digits(parts[2]) {
		return strings.Join(parts[:3], "-")
	}
	if n := len(parts); n > 1 && (len(parts[n-1]) == 8 && digits(parts[n-1]) || parts[n-1] == "latest") {
		return strings.Join(parts[:n-1], "-")
	}
	return model
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Scope returns the scope NewTransport's Transport (with the default
// Options.Class) charges the requests of a key to a model, e.g. for
// Transport.Usage: "cred-" and a hash, "/", the model's class. A
// Transport whose Options.Tollgate.Scope names pools puts that name
// before the "/".
func Scope(key, model string) string {
	return scopeName(pool(key), ModelClass(model))
}

// scopeName joins a pool and a class; a request with no model spends the
// pool alone.
func scopeName(pool, class string) string {
	if class == "" {
		return pool
	}
	return pool + "/" + className(class)
}

// className returns a class's name as scopes, logs and errors show it:
// as it is when it is a short name of letters, digits and . _ - : @ +,
// "class-" and a hash otherwise (provider.Name).
func className(m string) string { return provider.Name(m, "._-:@+", "class-") }
