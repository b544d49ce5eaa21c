package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The exit statuses of status -check: a contract with cron and monitoring
// systems (docs/foresight.md).
const (
	checkOK      = 0 // no window is forecast to be spent before its units come back
	checkAtRisk  = 1 // one or more is: a line each on stdout
	checkUsage   = 2 // bad usage
	checkFailed  = 3 // could not check: Redis unreachable, no tollgate keys, unknown scope
	checkHeading = "status -check"
)

// An exitError ends the command with its own exit status; its message,
// when there is one, is the line on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// check is status -check: one line per window at risk (forecast to be
// spent before its units come back; a token bucket whose reported
// spending outruns its refill), and the exit status says whether any is.
func (c *cli) check(ctx context.Context, conn *connection, scope string) error {
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return cannotCheck(err)
	}
	defer client.Close()
	r, err := gather(ctx, lim, client, conn.prefix, scope, c.clock, c.zoneOrUTC())
	if err == nil && len(r.Scopes) == 0 {
		err = nothingFound(ctx, lim, conn, scope)
	}
	if err != nil {
		return cannotCheck(err)
	}
	var b strings.Builder
	for _, s := range r.Scopes {
		for _, bk := range s.Buckets {
			for _, w := range bk.Windows {
				if f := w.Forecast; f != nil && f.AtRisk {
					fmt.Fprintf(&b, "scope %s bucket %s %s: %s\n", s.Scope, bk.Bucket, w.Window, f.Text)
				}
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := c.stdout.Write([]byte(b.String())); err != nil {
		return cannotCheck(err)
	}
	return &exitError{code: checkAtRisk}
}

// cannotCheck is exit status 3 for anything that kept -check from
// checking; bad usage stays bad usage (2).
func cannotCheck(err error) error {
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &exitError{code: checkFailed, msg: checkHeading + ": could not check: " + err.Error()}
}
