package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keypart"
)

// grace is how long past its staleness a process stays in a scope's
// sorted set before a writer prunes it: room for hosts' clocks to differ.
// The record itself is gone by then (its own TTL), and readers skip it
// from its staleness on.
const grace = time.Minute

// writeScript writes one process's record of a scope:
// KEYS[1] <prefix>{S}:spenders, KEYS[2] <prefix>{S}:spender.<P>;
// ARGV[1] P, ARGV[2] the record, ARGV[3] its TTL (ms), ARGV[4] the instant
// (ms) it goes stale, ARGV[5] the score below which processes are pruned
// ("(" and an instant), ARGV[6] the sorted set's least TTL (ms). Numbers
// come in as strings: the script formats none.
var writeScript = redis.NewScript(writeSource)

const writeSource = `
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[5])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
return 1
`

// leaveScript removes one process's record of a scope: the keys and ARGV[1]
// as writeScript's.
var leaveScript = redis.NewScript(leaveSource)

const leaveSource = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`

// indexKey and recordKey are a scope's keys (see the package's doc).
func indexKey(prefix, scopePart string) string {
	return prefix + "{" + scopePart + "}:spenders"
}

func recordKey(prefix, scopePart, member string) string {
	return prefix + "{" + scopePart + "}:spender." + member
}

// Run writes the records every Interval, until ctx is done: each write
// comes at least Interval after the last, and none comes while the process
// is idle. Run it on a goroutine of its own; failed writes go to
// Options.OnError.
func (r *Recorder) Run(ctx context.Context) {
	if r == nil {
		return
	}
	t := time.NewTimer(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Flush(ctx, time.Now()); err != nil && r.onError != nil && ctx.Err() == nil {
			r.onError(err)
		}
		t.Reset(r.interval)
	}
}

// Flush writes, at now, the record of every scope whose counts changed
// since its last write or that has requests waiting, in one pipeline: one
// script call per scope. It writes nothing when less than Interval has
// passed since its last write (the counts wait for the next), nor when
// nothing changed and nothing waits. A scope whose write failed is written
// again at the next Flush; its counts are kept meanwhile.
func (r *Recorder) Flush(ctx context.Context, now time.Time) error {
	return r.flush(ctx, now, false)
}

// Close writes, at now, what changed since the last write, however soon
// after it: call it when the process stops, after Run has returned. The
// records stay, and age out with the span (see Options.TTL): a process
// that ran for a few seconds, as a cron job does, is still shown among
// those that spent in the span after it exited.
func (r *Recorder) Close(ctx context.Context, now time.Time) error {
	return r.flush(ctx, now, true)
}

// flush is Flush, and Close when final: then the interval does not hold
// it back.
func (r *Recorder) flush(ctx context.Context, now time.Time, final bool) error {
	if r == nil {
		return nil
	}
	r.flushing.Lock()
	defer r.flushing.Unlock()
	if !final && !r.last.IsZero() && now.Sub(r.last) < r.interval {
		return nil
	}
	at := now.UnixMilli()
	from := at - r.span.Milliseconds()
	recs := map[string]*record{}
	rec := func(scope string) *record {
		x := recs[scope]
		if x == nil {
			x = &record{V: Format, At: at, TTL: r.ttl.Milliseconds(), Span: r.span.Milliseconds(), Process: r.process, Scope: scope}
			recs[scope] = x
		}
		return x
	}
	changed := map[string]bool{}
	type shown struct {
		c      *waitCell
		n      int
		oldest int64
	}
	waitsOf := map[string][]shown{}

	r.mu.RLock()
	for k, c := range r.spent {
		if c.advance(at, from) {
			changed[k.scope] = true
		}
		if n := c.sum(); n != 0 {
			x := rec(k.scope)
			x.Spent = append(x.Spent, spentEntry{k.bucket, k.endpoint, k.caller, n})
		}
	}
	for k, c := range r.refused {
		if c.advance(at, from) {
			changed[k.scope] = true
		}
		if n := c.sum(); n != 0 {
			x := rec(k.scope)
			x.Refused = append(x.Refused, refusedEntry{k.bucket, k.endpoint, k.caller, string(k.cause), n})
		}
	}
	for k, c := range r.waits {
		n, oldest := c.state()
		if n > 0 {
			changed[k.scope] = true
			x := rec(k.scope)
			x.Waiting = append(x.Waiting, waitEntry{k.bucket, k.caller, n, oldest})
		}
		if n != c.shownN || oldest != c.shownOldest {
			changed[k.scope] = true
		}
		if n == 0 {
			if c.idleSince == 0 {
				c.idleSince = at
			}
		} else {
			c.idleSince = 0
		}
		waitsOf[k.scope] = append(waitsOf[k.scope], shown{c, n, oldest})
	}
	r.mu.RUnlock()
	for scope := range r.failed {
		changed[scope] = true
	}
	defer r.evict(at)
	if len(changed) == 0 {
		return nil
	}

	scopes := make([]string, 0, len(changed))
	for s := range changed {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	type write struct {
		keys []string
		args []any
	}
	writes := make([]write, len(scopes))
	// A record lives, in Redis and for readers, until its counts have
	// left the span (its TTL says how long its waiting requests count).
	ttl := r.kept().Milliseconds()
	for i, scope := range scopes {
		x := rec(scope)
		x.sort()
		body, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("spend: %w", err)
		}
		part := keypart.Of(scope)
		writes[i] = write{
			keys: []string{indexKey(r.prefix, part), recordKey(r.prefix, part, r.member)},
			args: []any{r.member, body, strconv.FormatInt(ttl, 10), strconv.FormatInt(at+ttl, 10),
				"(" + strconv.FormatInt(at-grace.Milliseconds(), 10), strconv.FormatInt(ttl+grace.Milliseconds(), 10)},
		}
	}
	errs := r.run(ctx, writeScript, len(writes), func(i int) ([]string, []any) { return writes[i].keys, writes[i].args })
	r.last = now
	var failed []error
	for i, scope := range scopes {
		if errs[i] != nil {
			r.failed[scope] = true
			failed = append(failed, errs[i])
			continue
		}
		delete(r.failed, scope)
		r.written[scope] = true
		for _, w := range waitsOf[scope] {
			w.c.shownN, w.c.shownOldest = w.n, w.oldest
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("spend: writing %d of %d scopes' records: %w", len(failed), len(scopes), failed[0])
	}
	return nil
}

// run calls script n times in one pipeline, with the keys and arguments
// args(i) gives, and again with EVAL for calls the server had no script
// for, and returns each call's error.
func (r *Recorder) run(ctx context.Context, script *redis.Script, n int, args func(i int) ([]string, []any)) []error {
	cmds := make([]*redis.Cmd, n)
	_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			keys, argv := args(i)
			cmds[i] = script.EvalSha(ctx, p, keys, argv...)
		}
		return nil
	})
	var again []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range again {
				keys, argv := args(i)
				cmds[i] = script.Eval(ctx, p, keys, argv...)
			}
			return nil
		})
	}
	errs := make([]error, n)
	for i, c := range cmds {
		errs[i] = c.Err()
	}
	return errs
}

// advance moves what was added since the last flush into the ring, at the
// instant at, and forgets marks at or before from. It reports whether
// anything was added.
func (c *counter) advance(at, from int64) bool {
	d := c.pending.Swap(0)
	if d != 0 {
		c.ring = append(c.ring, mark{at, d})
	}
	i := 0
	for i < len(c.ring) && c.ring[i].at <= from {
		i++
	}
	if i > 0 {
		c.ring = c.ring[:copy(c.ring, c.ring[i:])]
	}
	return d != 0
}

// sum is what the ring counts.
func (c *counter) sum() int64 {
	var n int64
	for _, m := range c.ring {
		n += m.n
	}
	return n
}

// evict forgets the counters with nothing in the span and the waits idle
// for a span, so that the maps keep what is in use; a request that meets
// one of them again makes it anew.
func (r *Recorder) evict(at int64) {
	span := r.span.Milliseconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.spent {
		if len(c.ring) == 0 && c.pending.Load() == 0 {
			delete(r.spent, k)
		}
	}
	for k, c := range r.refused {
		if len(c.ring) == 0 && c.pending.Load() == 0 {
			delete(r.refused, k)
		}
	}
	for k, c := range r.waits {
		c.mu.Lock()
		idle := c.n == 0 && c.shownN == 0 && c.idleSince != 0 && at-c.idleSince >= span
		c.mu.Unlock()
		if idle {
			delete(r.waits, k)
		}
	}
}

// Leave removes this process's records from every scope it wrote, so that
// readers stop showing it at once rather than when its records go stale:
// call it when the process stops, after Run has returned.
func (r *Recorder) Leave(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.flushing.Lock()
	defer r.flushing.Unlock()
	scopes := make([]string, 0, len(r.written))
	for s := range r.written {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	errs := r.run(ctx, leaveScript, len(scopes), func(i int) ([]string, []any) {
		part := keypart.Of(scopes[i])
		return []string{indexKey(r.prefix, part), recordKey(r.prefix, part, r.member)}, []any{r.member}
	})
	for i, s := range scopes {
		if errs[i] == nil {
			delete(r.written, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("spend: leaving: %w", err)
	}
	return nil
}
