package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxName bounds the names (models, classes) kept as they are in scopes.
const maxName = 128

// Name returns a name a request gave (its model, its class) as scopes,
// logs and errors show it: as it is when it is a short name of letters,
// digits and the bytes of punct, and otherwise (empty too: a scope would
// end in its "/") as prefix ("model-") and 16 hex digits of its SHA-256,
// so that a hostile body or path cannot write what it likes into logs or
// scopes.
func Name(name, punct, prefix string) string {
	ok := name != "" && len(name) <= maxName
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(punct, c) >= 0
	}
	if ok {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:8])
}
