// Package keypart spells names (scopes, buckets, zones, processes) as
// parts of Redis keys, for every package that writes or reads tollgate's
// keys, so that all of them spell a name alike.
package keypart

import (
	"crypto/sha256"
	"encoding/hex"
)

// Of returns s when it is a short name (1 to 64 bytes) of letters, digits
// and . _ - / and otherwise "#" followed by a hash of s (32 hex digits of
// its SHA-256); '#' never appears in a readable name, so the two forms
// cannot collide. Braces, separators, spaces or 10 KB of text in a name
// can neither move a key to another Redis Cluster slot nor reach another
// scope's keys, and a credential scope's name never shows.
func Of(s string) string {
	if len(s) > 0 && len(s) <= 64 {
		readable := true
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
				c == '.' || c == '_' || c == '-' || c == '/') {
				readable = false
				break
			}
		}
		if readable {
			return s
		}
	}
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:16])
}
