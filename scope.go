package tollgate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// A ScopeFunc names the quota pool a request spends from: for YouTube, the
// Cloud project its key belongs to. It must be safe for concurrent use, and
// it must never return a raw credential: scopes appear in Redis keys, hooks,
// logs and errors. Use HashCredential for scopes derived from credentials.
type ScopeFunc func(req *http.Request) (string, error)

// defaultScope is the scope of every request of a Transport without a
// ScopeFunc.
const defaultScope = "default"

// scopeOf names the request's pool with f.
func scopeOf(f ScopeFunc, req *http.Request) (string, error) {
	if f == nil {
		return defaultScope, nil
	}
	s, err := f(req)
	if err == nil && s == "" {
		err = errors.New("tollgate: the scope func returned an empty scope")
	}
	return s, err
}

// Scope returns a ScopeFunc that puts every request in the pool name.
func Scope(name string) ScopeFunc {
	return func(*http.Request) (string, error) { return name, nil }
}

// CredentialScope returns a ScopeFunc that gives each credential its own
// pool, named by a hash of it: credential returns the request's secret (an
// API key, a token), and "" when the request carries none, which is an
// error. A secret of white space only is none too: it must not become a
// pool of its own.
func CredentialScope(credential func(*http.Request) string) ScopeFunc {
	return func(req *http.Request) (string, error) {
		secret := credential(req)
		if strings.TrimSpace(secret) == "" {
			return "", errors.New("tollgate: the request carries no credential to derive its scope from")
		}
		return HashCredential(secret), nil
	}
}

// HashCredential names a credential without revealing it: "cred-" and the
// first 16 bytes of its SHA-256, in hex, the scope CredentialScope gives.
// API keys and tokens are long random strings, so the name cannot be
// turned back into the secret. Call it to name such a scope yourself: in a
// ScopeFunc that derives its scope from a credential and more, or to read
// a credential's pool (Transport.Usage, a provider's Usage).
func HashCredential(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "cred-" + hex.EncodeToString(sum[:16])
}
