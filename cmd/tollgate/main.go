// Command tollgate is the operators' view of the quotas tollgate keeps in
// Redis: what is spent and left in every scope, bucket and window, and a
// kill switch that every process sharing the Redis obeys.
//
// Usage:
//
//	tollgate status [-scope S] [-watch [-every D]] [-json] [-check]
//	tollgate pause  -scope S [-bucket B] -for D -reason TEXT [-wait D]
//	tollgate resume -scope S [-bucket B] [-wait D]
//	tollgate spend  -scope S -bucket B -units N
//	tollgate serve  -config FILE
//	tollgate web    [-listen ADDR] [-scope S] [-every D]
//
// Every command takes -redis URL (or the environment variable
// TOLLGATE_REDIS): redis://, rediss:// (TLS), several URLs separated by
// commas for a Redis Cluster, or a Sentinel URL (its query names
// master_name, as redis.ParseFailoverURL reads it); and -prefix, the key prefix the programs
// use (quota.WithPrefix; default "tollgate:").
//
// status needs no cost table: it finds the scopes by SCAN and reads the
// limits each process leaves in Redis beside its windows (a description:
// names and numbers, nothing secret). pause and resume return once every
// process listening has applied them (up to -wait, 5s by default, then
// exit status 1): processes spending from leases, and processes
// remembering refusals, are told at once; the others read the pause in
// Redis at their next decision. spend records
// units spent outside tollgate, so that every process counts them.
//
// serve runs the gateway: a reverse proxy through which workers in any
// language spend the same quotas as Go processes (docs/gateway.md). It
// takes its Redis from its configuration file, not -redis.
//
// web serves the same report as a page for a browser (docs/web.md): a
// chart per window, the pauses, what waits and what is under way. It
// listens on 127.0.0.1:7478 by default and is read-only unless the
// environment variable TOLLGATE_OPERATOR_TOKEN is set: then the page can
// pause and resume, for an operator who types the token in.
//
// status shows, for every window, the rate it is spent at now and when it
// would be spent at that rate (docs/foresight.md). status -check prints a
// line per window forecast to be spent before its units come back, for
// cron and monitoring systems, and exits 0 when none is, 1 when one is, 2
// for bad usage, 3 when it could not check (Redis unreachable, no
// tollgate keys, an unknown scope).
//
// Exit status: 0 on success, 1 when the command failed (Redis unreachable,
// no tollgate keys, an unknown scope or bucket), 2 for bad usage; status
// -check's are above. Errors are one line on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// go-redis logs each failed dial on stderr; the command reports what
	// failed in one line of its own.
	redis.SetLogger(quiet{})
	c := &cli{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, terminal: isTerminal(os.Stdout), zone: time.Local}
	os.Exit(c.run(ctx, os.Args[1:]))
}

// cli is one run of the command: where it writes, and what the tests fix.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// terminal reports that stdout is a terminal: -watch then redraws in
	// place.
	terminal bool
	// clock, when set, replaces Redis's clock (quota.WithClock): for tests
	// on a fixed instant.
	clock func() time.Time
	// zone is where forecasts say their instants (a calendar day's are
	// said in its own zone): the machine's local zone; UTC when nil, as
	// the tests leave it.
	zone *time.Location
}

// zoneOrUTC is the zone forecasts are said in.
func (c *cli) zoneOrUTC() *time.Location {
	if c.zone == nil {
		return time.UTC
	}
	return c.zone
}

// A usageError is bad input: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

const usage = `usage:
  tollgate status [-scope S] [-watch [-every D]] [-json] [-check]
  tollgate pause  -scope S [-bucket B] -for D -reason TEXT [-by NAME]
  tollgate resume -scope S [-bucket B] [-reason TEXT] [-by NAME]
  tollgate spend  -scope S -bucket B -units N [-reason TEXT] [-by NAME]
  tollgate serve  -config FILE
  tollgate web    [-listen ADDR] [-scope S] [-every D]
status, pause, resume, spend and web take -redis URL (or TOLLGATE_REDIS) and -prefix P; "tollgate CMD -h" lists its flags`

// run runs the command line args and returns the exit status.
func (c *cli) run(ctx context.Context, args []string) int {
	err := c.dispatch(ctx, args)
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(c.stderr, "tollgate: "+oneLine(ee.msg))
		}
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintln(c.stderr, "tollgate: "+oneLine(err.Error()))
		return 2
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return 1 // interrupted: nothing to say
	}
	fmt.Fprintln(c.stderr, "tollgate: "+oneLine(err.Error()))
	return 1
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command given (want status, pause, resume, spend, serve or web; see tollgate help)")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "status":
		return c.status(ctx, rest)
	case "pause":
		return c.pause(ctx, rest)
	case "resume":
		return c.resume(ctx, rest)
	case "spend":
		return c.spend(ctx, rest)
	case "serve":
		return c.serve(ctx, rest)
	case "web":
		return c.web(ctx, rest)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(c.stdout, usage)
		return nil
	}
	return usagef("unknown command %q (want status, pause, resume, spend, serve or web)", cmd)
}

// flags starts a command's flag set with the flags every command takes.
func (c *cli) flags(name string) (*flag.FlagSet, *connection) {
	fs := flag.NewFlagSet("tollgate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by run; -h prints to stdout
	conn := &connection{}
	fs.StringVar(&conn.url, "redis", "", "the Redis URL: redis://, rediss://, a comma-separated list for a cluster, or a Sentinel URL (?master_name=NAME&addr=...) (default $TOLLGATE_REDIS)")
	fs.StringVar(&conn.prefix, "prefix", "tollgate:", "the key prefix the programs use")
	return fs, conn
}

// parse parses a command's flags; anything left over is bad usage.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(c.stdout, "usage of %s:\n", fs.Name())
			fs.SetOutput(c.stdout)
			fs.PrintDefaults()
			return err
		}
		return usagef("%s: %v", command(fs), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", command(fs), fs.Arg(0))
	}
	return nil
}

// command names a command's flag set in its errors, e.g. "status": run
// says "tollgate: " before them.
func command(fs *flag.FlagSet) string {
	return strings.TrimPrefix(fs.Name(), "tollgate ")
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// now reads the command's clock: the fixed one of the tests, else the
// machine's.
func (c *cli) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}
