package quota

import "github.com/tollgate/tollgate/internal/keypart"

// DefaultPrefix starts every key the limiter writes unless WithPrefix says otherwise.
const DefaultPrefix = "tollgate:"

// format is the Redis format this package reads and writes (see below).
const format = 3

// Key layout of Redis format 3, for a scope S, a bucket B and a window w
// (see log.lua and binary.lua):
//
//	<prefix>{S}:B:w:log    closed slices: a list of entries, oldest first, each 16 bytes: µs and units,
//	                       big-endian 8-byte integers (format 2's "<µs>:<units>" read too)
//	<prefix>{S}:B:w:meta   "#3:" then big-endian 8-byte fields <open slice's latest µs> <its units> <sum>
//	                       <open slice's end µs>, a byte <closed slices>, fields <until µs> <pause µs>
//	                       <head µs> <expiry µs> <origin µs> <slice µs>, then the closed slices (16 bytes
//	                       each, as entries), then ";<id>=<end µs>:<units>" per lease
//	<prefix>{S}:windows    the scope's metas: a sorted set of meta keys by their expiry (µs), which
//	                       a pause reads to write its end into their pause field
//	<prefix>{S}:B:r<period>:tat   a token bucket's state (see bucket.lua): "#3r:" then five big-endian
//	                       8-byte integers. A key kind older processes never read: their tools
//	                       skip it (no ":log", ":meta" or ":sum" suffix)
//	<prefix>{S}:B:r<period>:tat:held  beside a token bucket that refunds as its upstream (Limit.AsUpstream),
//	                       while calls wait on it: five big-endian 8-byte integers (see bucket.lua's
//	                       bucket_queue). A key kind older processes never read (no known suffix)
//	<prefix>{S}:B:w:tenants  the tenants of a window with shares (Demand.Shares; see fair.lua): "T1",
//	                       then per tenant "\n<length>:<name><seen µs>" and ";<window start µs>:<units>"
//	                       per window it spent in. A key kind older processes never read (no
//	                       ":log", ":meta" or ":sum" suffix)
//	<prefix>{S}:B:pause    the instant (µs) bucket B may spend again, while paused
//	<prefix>{S}:pause      the same for the whole scope
//	<prefix>{S}:B:announced        "<reset µs>:<limit>:<window µs>", B's newest announcement
//	<prefix>{S}:B:slots            B's slots in use: a sorted set of slot ids by expiry (µs)
//	<prefix>{S}:B:slots:queue      its waiting room: waiter ids by ticket
//	<prefix>{S}:B:slots:alive      the same ids by the instant (µs) their wait expires
//	<prefix>{S}:B:slots:n          the last ticket drawn
//	<prefix>{S}:background[:alive|:n]  the scope's background room, likewise
//	<prefix>{S}:B:fair[:alive|:n]  the room of B's calls that may not hold (a bucket with shares or a
//	                       pace; fairroom.lua), likewise; waiter ids "<id>:<i|b><tenant>"
//	<prefix>{S}:B:fair:who the tenants with interactive calls in that room, by how many
//	<prefix>{S}:B:about    B's description for operators' tools: JSON, versioned (describe.go)
//	<prefix>{S}:[B:]pause:why  "<until µs>:<reason>", the reason of the pause ending at until
//	<prefix>{S}:[B:]pause-up   "<until µs>": the pause ending at until was set for an upstream's answer
//	                           (older processes' tools skip it: no colon after the scope's, no known suffix after a bucket's)
//	<prefix>control[:applied]  the channels pauses and resumes are told and acknowledged on
//	<prefix>actions        the record of operators' actions (quota/ops): a list of versioned JSON entries,
//	                       the newest 1000, dropped 30 days after the newest; no decision reads it
//
// A window is named w<length> (sliding), day@<zone> (calendar), f<length>
// (fixed, whatever its end) or n.<name> (a limit with a Name). Its calls
// are counted by slice, a thousandth of the window (no finer than a
// millisecond): the meta keeps the newest slice open (the units counted
// there and the instant of its latest call) and the sum of everything
// counted, so that a common decision writes the meta alone; a call in a
// later slice closes the open one into the meta's closed slices, which
// join the log eight at a time. A meta's records after
// its fixed fields are leases, and "~a" records: units an upstream
// announced as spent beyond the window's count (announce.lua), which count
// the same way.
//
// The format is versioned. Any change to these keys or to how their values
// are encoded bumps format (and log.lua's FORMAT), and must keep two rules
// that make processes of adjacent formats safe on one Redis: a reader takes
// nothing it cannot read exactly for missing or zero (every script stops
// with a FORMAT error, which the limiter returns as ErrFormat); and a meta
// of any later format begins with '#' and its number, so that a process of
// an earlier format falls off its fast path and refuses it. Format 3 reads
// state of format 2 exactly (a meta "#2:<until µs>:<open slice's end
// µs>:<sum>:<open slice's units>:<its latest µs>:<head µs>:<expiry
// µs>:<origin µs>:<slice µs>" and leases, entries "<µs>:<units>") and of
// format 1 (a meta "<until µs>:<head µs>:<expiry µs>:1" and leases, the
// sum in <prefix>{S}:B:w:sum, entries "<µs>:<units>:<id>"), and rewrites
// it in format 3 when it next writes the window; from then on, a process
// of an earlier format refuses it. Format 2 read the pause keys at every
// decision, format 3 the metas' pause field, which format 2's pauses do
// not write: upgrade every process sharing a Redis together, tools
// included, or give the new version its own prefix (WithPrefix).

// Every key of a scope carries the scope in one {hash tag}, so a decision's
// keys live on one Redis Cluster slot. Scope, bucket and zone names pass
// through keyPart, which keeps readable names as they are and replaces any
// other string by a hash: braces, separators, spaces or 10 KB of text in a
// name can neither move a key to another slot nor reach another scope's keys.

// keyPart returns s when it is a short name of letters, digits and . _ - /
// and otherwise "#" followed by a hash of s (keypart.Of: the spelling every
// package that names tollgate's keys shares).
func keyPart(s string) string { return keypart.Of(s) }

// scopeKey is the prefix all of a scope's keys share, hash tag included.
func (l *Limiter) scopeKey(scope string) string {
	return l.prefix + "{" + keyPart(scope) + "}:"
}

// windowKeys returns the log and meta keys of one bucket's window in a
// scope. A token bucket has one key, its state (see bucket.lua), named
// for both.
func windowKeys(scopeKey, bucket string, lim Limit) (log, meta string) {
	base := scopeKey + keyPart(bucket) + ":" + lim.windowKey()
	if lim.refilling() {
		return base + ":tat", base + ":tat"
	}
	return base + ":log", base + ":meta"
}

// pauseKey is the pause of a bucket in a scope, or of the whole scope for
// the bucket "".
func pauseKey(scopeKey, bucket string) string {
	if bucket == "" {
		return scopeKey + "pause"
	}
	return scopeKey + keyPart(bucket) + ":pause"
}
