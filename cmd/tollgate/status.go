package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/redisneeds"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// status shows the quotas found in Redis, once or (-watch) until
// interrupted.
func (c *cli) status(ctx context.Context, args []string) error {
	fs, conn := c.flags("status")
	scope := fs.String("scope", "", "show this scope only (a name, or the # hash status shows)")
	watch := fs.Bool("watch", false, "redraw every -every until interrupted")
	every := fs.Duration("every", 2*time.Second, "how often -watch redraws")
	frames := fs.Int("frames", 0, "with -watch, stop after this many redraws (0: until interrupted)")
	asJSON := fs.Bool("json", false, "write JSON (with -watch, one document per line)")
	check := fs.Bool("check", false, "print a line per window at risk and exit 1 if any is, 0 if none, 3 if it could not check")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if *check {
		if *watch || *asJSON {
			return usagef("status: -check prints a line per window at risk: it takes neither -watch nor -json")
		}
		return c.check(ctx, conn, *scope)
	}
	if *watch && *every < 100*time.Millisecond {
		return usagef("-every %v: redraw at most ten times a second", *every)
	}
	if *frames < 0 {
		return usagef("-frames %d: must be at least 0", *frames)
	}
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	// Once, on stderr: a Redis that evicts keys or has no append-only file
	// loses counts (nothing when its access control denies INFO).
	for _, w := range redisneeds.Warnings(ctx, client) {
		fmt.Fprintln(c.stderr, "tollgate: warning: "+w)
	}
	read := func() (*report, error) {
		r, err := gather(ctx, lim, client, conn.prefix, *scope, c.clock, c.zoneOrUTC())
		if err != nil {
			return nil, err
		}
		if len(r.Scopes) == 0 {
			return r, nothingFound(ctx, lim, conn, *scope)
		}
		return r, nil
	}
	if !*watch {
		r, err := read()
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.stdout, r)
		}
		return writeText(c.stdout, r)
	}
	return c.watch(ctx, read, *every, *frames, *asJSON)
}

// nothingFound explains an empty report: no tollgate keys at all, or no
// such scope.
func nothingFound(ctx context.Context, lim *quota.Limiter, conn *connection, scope string) error {
	if scope == "" {
		return fmt.Errorf("no tollgate keys under prefix %q at %s (is -prefix the programs' prefix, and have they decided anything within the hour?)",
			conn.prefix, redact(conn.spec))
	}
	all, err := ops.New(lim).Survey(ctx, "")
	if err != nil {
		return err
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Scope)
	}
	if len(names) == 0 {
		return fmt.Errorf("unknown scope %q: no tollgate keys under prefix %q", scope, conn.prefix)
	}
	if len(names) > 10 {
		names = append(names[:10], "...")
	}
	return fmt.Errorf("unknown scope %q under prefix %q (found: %s)", scope, conn.prefix, strings.Join(names, ", "))
}

// watch redraws the report every interval: in place on a terminal (the
// alternate screen, left on exit), as successive plain reports otherwise.
// A failed read is shown, not fatal: Redis may come back.
func (c *cli) watch(ctx context.Context, read func() (*report, error), every time.Duration, frames int, asJSON bool) error {
	inPlace := c.terminal && !asJSON
	if inPlace {
		io.WriteString(c.stdout, "\x1b[?1049h\x1b[?25l") // alternate screen, cursor hidden
		defer io.WriteString(c.stdout, "\x1b[?25h\x1b[?1049l")
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; ; n++ {
		var frame bytes.Buffer
		r, err := read()
		switch {
		case asJSON && err == nil:
			b, _ := json.Marshal(r)
			frame.Write(append(b, '\n'))
		case asJSON:
			b, _ := json.Marshal(map[string]string{"error": oneLine(err.Error())})
			frame.Write(append(b, '\n'))
		default:
			if r != nil && len(r.Scopes) > 0 {
				writeText(&frame, r)
			}
			if err != nil {
				fmt.Fprintf(&frame, "tollgate: %s\n", oneLine(err.Error()))
			}
			fmt.Fprintf(&frame, "\n(every %v; interrupt to stop)\n", every)
		}
		if inPlace {
			// Home, each line cleared to its end, the rest of the screen cleared.
			s := strings.ReplaceAll(strings.TrimSuffix(frame.String(), "\n"), "\n", "\x1b[K\r\n")
			io.WriteString(c.stdout, "\x1b[H"+s+"\x1b[K\x1b[J")
		} else {
			if n > 1 && !asJSON {
				io.WriteString(c.stdout, "\n")
			}
			c.stdout.Write(frame.Bytes())
		}
		if frames > 0 && n >= frames {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
