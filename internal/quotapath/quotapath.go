// Package quotapath holds what tollgate's request path (the root
// package) and cmd/tollgate reach of package quota, and no user calls:
// constants and rules both sides share, and, as grpc-go's internal func
// vars do, methods of *quota.Limiter that quota does not export. Package
// quota fills the vars in when it is initialized; this package imports
// nothing of tollgate's, so quota may import it.
package quotapath

import "time"

// MaxReason is the longest reason a pause may carry, in bytes
// (quota.Limiter.PauseBecause refuses a longer one).
const MaxReason = 200

// ResetTolerance is how far apart two announced resets of a quota whose
// window is window (0: not known) may be and still be one reset, read at
// different instants: upstreams that announce a reset as a delay state it
// in whole seconds, or rounded, so each response moves it a little. It is
// a second, or half the window when that is shorter. Of the readings of
// one reset, the first recorded is kept; an announcement whose reset is
// earlier than the newest recorded by more is older, and changes nothing.
func ResetTolerance(window time.Duration) time.Duration {
	if window > 0 {
		return min(time.Second, window/2)
	}
	return time.Second
}

// PriorityKey is the context key quota.WithPriority stores a
// quota.Priority under: ctx.Value(PriorityKey{}) reads it (nil:
// Interactive).
type PriorityKey struct{}

// PauseUpstream is set by package quota: a
// func(l *quota.Limiter, ctx context.Context, scope, bucket string, d time.Duration, reason string) (quota.Paused, error)
// that pauses bucket in scope as l.PauseBecause does, for an upstream's
// answer (a 429, YouTube's quotaExceeded): the pause's Upstream is set,
// so that refusals during it say the upstream's pause, not an
// operator's. The reason says what the upstream answered, e.g. "the
// upstream answered 429 to search.list".
var PauseUpstream any

// PauseAmong is set by package quota: a
// func(l *quota.Limiter, ctx context.Context, scope string, buckets ...string) (string, quota.Paused, error)
// that reads, in one round trip and writing nothing, the pauses of scope
// and of its buckets, and returns the one that ends last with its bucket
// ("" for the scope's own): e.g. for a call about to be sent after a
// wait, whether anything now stops it. Its Until is zero when none is
// set.
var PauseAmong any

// Store is set by package quota: a
// func(l *quota.Limiter) (redis.UniversalClient, string)
// that returns the Redis client l decides on and the prefix of its keys
// (quota.WithPrefix, or quota.DefaultPrefix): where the request path's
// record of what this process spends (internal/spend) is written, next
// to the quota it spends.
var Store any
