package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/web"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// pause is the kill switch: it pauses a scope, or one bucket of it, in
// every process sharing the Redis, and returns once every process
// listening has applied it.
func (c *cli) pause(ctx context.Context, args []string) error {
	fs, conn := c.flags("pause")
	scope := fs.String("scope", "", "the scope to pause (required)")
	bucket := fs.String("bucket", "", "pause this bucket only (default: the whole scope)")
	d := fs.Duration("for", 0, "how long, e.g. 30m (required)")
	reason := fs.String("reason", "", "why, shown by status and kept in Redis: never a secret (required)")
	wait := fs.Duration("wait", 5*time.Second, "how long to wait for the processes listening to apply it")
	by := byFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	who, err := actor(fs, *by)
	if err != nil {
		return err
	}
	switch {
	case *scope == "":
		return usagef("pause: -scope is required")
	case *d <= 0:
		return usagef("pause: -for must be a positive duration, e.g. 30m")
	case *d > web.MaxPause:
		return usagef("pause: -for %v is longer than a pause may be (%v): pause again when it ends", *d, web.MaxPause)
	case strings.TrimSpace(*reason) == "":
		return usagef("pause: -reason is required: say why, for the others who see it in status")
	case len(*reason) > quotapath.MaxReason:
		return usagef("pause: -reason is %d bytes; at most %d", len(*reason), quotapath.MaxReason)
	case *wait <= 0:
		return usagef("pause: -wait must be positive")
	}
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	p, reach, err := pauseConfirmed(ctx, lim, conn, *scope, *bucket, *d, *reason, *wait)
	if err != nil {
		return err
	}
	now, err := serverNow(ctx, client, c.clock)
	if err != nil {
		return err
	}
	what := target(*scope, *bucket)
	if p.Reason != *reason || p.Until.Sub(now) > *d+time.Second {
		fmt.Fprintf(c.stdout, "%s was already paused for longer, until %s", what, instantText(p.Until, now, time.UTC))
		if p.Reason != "" {
			fmt.Fprintf(c.stdout, ": %s", p.Reason)
		}
		fmt.Fprintln(c.stdout, "; that pause stays")
	} else {
		fmt.Fprintf(c.stdout, "paused %s until %s: %s\n", what, instantText(p.Until, now, time.UTC), p.Reason)
	}
	rec := c.record(ctx, lim, client, ops.Action{By: who, What: "pause", Scope: *scope, Bucket: *bucket, For: *d, Why: *reason})
	return both(c.reached(reach, *wait, "pause"), rec)
}

// resume lifts the pauses of a scope, or of one bucket, and clears what
// the processes listening remember of refusals there.
func (c *cli) resume(ctx context.Context, args []string) error {
	fs, conn := c.flags("resume")
	scope := fs.String("scope", "", "the scope to resume (required)")
	bucket := fs.String("bucket", "", "resume this bucket only (default: the scope and every bucket in it)")
	wait := fs.Duration("wait", 5*time.Second, "how long to wait for the processes listening to apply it")
	reason := fs.String("reason", "", "why, for the record of operators' actions: never a secret")
	by := byFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	who, err := actor(fs, *by)
	if err != nil {
		return err
	}
	switch {
	case *scope == "":
		return usagef("resume: -scope is required")
	case len(*reason) > quotapath.MaxReason:
		return usagef("resume: -reason is %d bytes; at most %d", len(*reason), quotapath.MaxReason)
	case !plainText(*reason):
		return usagef("resume: -reason must be plain text: no control characters, valid UTF-8")
	case *wait <= 0:
		return usagef("resume: -wait must be positive")
	}
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	lifted, reach, err := resumeConfirmed(ctx, lim, conn, *scope, *bucket, *wait)
	if err != nil {
		return err
	}
	if lifted == 0 {
		fmt.Fprintf(c.stdout, "%s was not paused; remembered refusals cleared\n", target(*scope, *bucket))
	} else {
		fmt.Fprintf(c.stdout, "resumed %s: %s lifted\n", target(*scope, *bucket), count(lifted, "pause"))
	}
	rec := c.record(ctx, lim, client, ops.Action{By: who, What: "resume", Scope: *scope, Bucket: *bucket, Why: strings.TrimSpace(*reason)})
	return both(c.reached(reach, *wait, "resume"), rec)
}

// spend records units spent outside tollgate in a bucket's windows, as
// the processes describe them.
func (c *cli) spend(ctx context.Context, args []string) error {
	fs, conn := c.flags("spend")
	scope := fs.String("scope", "", "the scope (required)")
	bucket := fs.String("bucket", "", "the bucket (required)")
	units := fs.Int64("units", 0, "the units spent (required)")
	reason := fs.String("reason", "", "why, for the record of operators' actions: never a secret")
	by := byFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	who, err := actor(fs, *by)
	if err != nil {
		return err
	}
	switch {
	case *scope == "" || *bucket == "":
		return usagef("spend: -scope and -bucket are required")
	case *units <= 0 || *units > quota.MaxUnits:
		return usagef("spend: -units must be a positive count of units")
	case len(*reason) > quotapath.MaxReason:
		return usagef("spend: -reason is %d bytes; at most %d", len(*reason), quotapath.MaxReason)
	case !plainText(*reason):
		return usagef("spend: -reason must be plain text: no control characters, valid UTF-8")
	}
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := known(ctx, lim, conn, *scope, *bucket); err != nil {
		return err
	}
	d, ok, err := ops.New(lim).Description(ctx, *scope, *bucket)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("bucket %q of scope %q: no process described its limits within the hour, so its windows are unknown", *bucket, *scope)
	}
	var a quota.Announced
	var announced bool
	if d.Announced != "" {
		if a, announced, err = lim.LastAnnouncement(ctx, *scope, *bucket); err != nil {
			return err
		}
	}
	limits := d.Enforced(a, announced)
	if len(limits) == 0 {
		return fmt.Errorf("bucket %q of scope %q: its limit is not learned yet (the upstream announced none)", *bucket, *scope)
	}
	if err := lim.Record(ctx, *scope, quota.Demand{Bucket: *bucket, Units: *units, Limits: limits}); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "recorded %d units spent in %s, in %s\n", *units, target(*scope, *bucket), count(len(limits), "window"))
	return c.record(ctx, lim, client, ops.Action{By: who, What: "spend", Scope: *scope, Bucket: *bucket, Units: *units, Why: strings.TrimSpace(*reason)})
}

// pauseConfirmed pauses scope (bucket "": all of it) for d, once Redis is
// found to hold it, and waits up to wait for the processes listening to
// apply the pause: what `tollgate pause` and the page's button do.
func pauseConfirmed(ctx context.Context, lim *quota.Limiter, conn *connection, scope, bucket string, d time.Duration, reason string, wait time.Duration) (quota.Paused, ops.Reach, error) {
	if err := known(ctx, lim, conn, scope, bucket); err != nil {
		return quota.Paused{}, ops.Reach{}, err
	}
	var p quota.Paused
	reach, err := ops.New(lim).Confirm(ctx, wait, func(ctx context.Context) error {
		var err error
		p, err = lim.PauseBecause(ctx, scope, bucket, d, reason)
		return err
	})
	return p, reach, err
}

// resumeConfirmed lifts the pauses of scope (bucket "": the scope's and
// every bucket's) as pauseConfirmed sets one, and says how many it lifted.
func resumeConfirmed(ctx context.Context, lim *quota.Limiter, conn *connection, scope, bucket string, wait time.Duration) (int, ops.Reach, error) {
	if err := known(ctx, lim, conn, scope, bucket); err != nil {
		return 0, ops.Reach{}, err
	}
	var lifted int
	reach, err := ops.New(lim).Confirm(ctx, wait, func(ctx context.Context) error {
		var err error
		lifted, err = ops.New(lim).Resume(ctx, scope, bucket)
		return err
	})
	return lifted, reach, err
}

// known checks that Redis holds the scope, and the bucket when one is
// named, under the prefix: a typo must not pause or count nothing.
func known(ctx context.Context, lim *quota.Limiter, conn *connection, scope, bucket string) error {
	found, err := ops.New(lim).Survey(ctx, scope)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nothingFound(ctx, lim, conn, scope)
	}
	s := found[0]
	if s.Hashed {
		return fmt.Errorf("scope %s is known by its hash only: name it as the programs do", scope)
	}
	if bucket == "" {
		return nil
	}
	var names []string
	for _, b := range s.Buckets {
		names = append(names, b.Bucket)
	}
	if !slices.Contains(names, bucket) {
		return fmt.Errorf("unknown bucket %q in scope %q (found: %s)", bucket, scope, strings.Join(names, ", "))
	}
	return nil
}

// reached says how far a pause or resume went; fewer acknowledgements
// than processes listening is a failure the operator must hear of.
func (c *cli) reached(r ops.Reach, wait time.Duration, what string) error {
	switch {
	case r.Listening == 0:
		fmt.Fprintf(c.stdout, "no process was listening (none holds a lease, remembers a refusal or has requests waiting): each reads the %s in Redis at its next decision\n", what)
	case r.Applied == r.Listening:
		if r.Listening == 1 {
			fmt.Fprintln(c.stdout, "the 1 process listening applied it")
		} else {
			fmt.Fprintf(c.stdout, "all %d processes listening applied it\n", r.Listening)
		}
	default:
		return fmt.Errorf("the %s is set in Redis, but only %d of %d processes listening applied it within %v: the others see it at their next decision in Redis, when their lease ends, or before sending a request that waited",
			what, r.Applied, r.Listening, wait)
	}
	return nil
}

// target names what a command acts on.
func target(scope, bucket string) string {
	if bucket == "" {
		return fmt.Sprintf("scope %q", scope)
	}
	return fmt.Sprintf("bucket %q of scope %q", bucket, scope)
}
