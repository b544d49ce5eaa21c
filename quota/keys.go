package quota

import (
	"crypto/sha256"
	"encoding/hex"
)

// DefaultPrefix starts every key the limiter writes unless WithPrefix says otherwise.
const DefaultPrefix = "tollgate:"

// format is the Redis format this package reads and writes (see below).
const format = 1

// Key layout of Redis format 1, for a scope S, a bucket B and a window w
// (see log.lua):
//
//	<prefix>{S}:B:w:log    the log: a list of "<µs>:<units>:<id>" entries, oldest first
//	<prefix>{S}:B:w:sum    the units in the log and leases, an integer
//	<prefix>{S}:B:w:meta   "<until µs>:<head µs>:<expiry µs>:1", then ";<id>=<end µs>:<units>" per lease
//	<prefix>{S}:B:pause    the instant (µs) bucket B may spend again, while paused
//	<prefix>{S}:pause      the same for the whole scope
//	<prefix>{S}:B:announced        "<reset µs>:<limit>:<window µs>", B's newest announcement
//	<prefix>{S}:B:slots            B's slots in use: a sorted set of slot ids by expiry (µs)
//	<prefix>{S}:B:slots:queue      its waiting room: waiter ids by ticket
//	<prefix>{S}:B:slots:alive      the same ids by the instant (µs) their wait expires
//	<prefix>{S}:B:slots:n          the last ticket drawn
//	<prefix>{S}:background[:alive|:n]  the scope's background room, likewise
//
// A window is named w<length> (sliding), day@<zone> (calendar), f<length>
// (fixed, whatever its end) or n.<name> (a limit with a Name). A meta's
// records after its head and expiry are leases, and "~a" records: units an
// upstream announced as spent beyond the window's count (announce.lua),
// which a reader that knows only leases counts the same way.
//
// The format is versioned. Any change to these keys or to how their values
// are encoded bumps format (and log.lua's FORMAT), and must keep two rules
// that make processes of adjacent formats safe on one Redis: a reader takes
// nothing it cannot read exactly for missing or zero (every script stops
// with a FORMAT error, which the limiter returns as ErrFormat); and a meta
// of any later format begins with '#' and its number, so that a format-1
// process falls off its fast path (which compares the meta's first 16
// characters, all digits, with the clock) and refuses it. Metas written
// before formats were numbered lack the ":1" and are format 1 all the same.
// Format 1 grew keys a format-1 process of an earlier version does not
// read (slots, rooms, announcements): such a process reads every key it
// knows exactly, but enforces no caps or priorities while it runs.
//
// Every key of a scope carries the scope in one {hash tag}, so a decision's
// keys live on one Redis Cluster slot. Scope, bucket and zone names pass
// through keyPart, which keeps readable names as they are and replaces any
// other string by a hash: braces, separators, spaces or 10 KB of text in a
// name can neither move a key to another slot nor reach another scope's keys.

// keyPart returns s when it is a short name of letters, digits and . _ - /
// and otherwise "#" followed by a hash of s; '#' never appears in a readable
// name, so the two forms cannot collide.
func keyPart(s string) string {
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

// scopeKey is the prefix all of a scope's keys share, hash tag included.
func (l *Limiter) scopeKey(scope string) string {
	return l.prefix + "{" + keyPart(scope) + "}:"
}

// windowKeys returns the log, meta and sum keys of one bucket's window in a scope.
func windowKeys(scopeKey, bucket string, lim Limit) (log, meta, sum string) {
	base := scopeKey + keyPart(bucket) + ":" + lim.windowKey()
	return base + ":log", base + ":meta", base + ":sum"
}

// pauseKey is the pause of a bucket in a scope, or of the whole scope for
// the bucket "".
func pauseKey(scopeKey, bucket string) string {
	if bucket == "" {
		return scopeKey + "pause"
	}
	return scopeKey + keyPart(bucket) + ":pause"
}
