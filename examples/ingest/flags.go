package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// config is what the flags say.
type config struct {
	redis       string        // "" for the embedded Redis
	api         string        // API base URL
	keys        []string      // API keys, one pool
	table       string        // "classic" or "granular"
	quota       int64         // pool units per window
	searchQuota int64         // granular search bucket units per window (one per search.list call)
	window      time.Duration // 0: the Pacific day
	reserve     int64         // units kept below the quota
	regions     []string
	policy      string             // "wait" or "error"
	duration    time.Duration      // 0: one pass per region
	maxWait     time.Duration      // how long a call may wait for its turn
	simulate    string             // serve only the simulated API on this address
	shares      map[string]float64 // -shares: each region's weight; nil: no shares
	pace        float64            // -pace: the burst of a paced window; < 0: no pace

	offline bool // no keys: run against the simulated API
	set     map[string]bool
}

// usageError is a bad command line: exit 2 with its one-line message.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef builds a usageError, escaping control characters a hostile
// argument may bring, so that the message stays on one line.
func usagef(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if strings.ContainsFunc(msg, unicode.IsControl) {
		msg = strings.Trim(strconv.QuoteToGraphic(msg), `"`)
	}
	return &usageError{msg: "ingest: " + msg}
}

const defaultAPI = "https://youtube.googleapis.com/youtube/v3"

// The quota of a real Cloud project, with -keys.
const (
	defaultQuota       = 10000 // pool units per Pacific day
	defaultSearchQuota = 100   // search units per Pacific day (granular)
)

// The offline demo's quota: small enough that eight regions run out of it
// in the first window and finish in the next ones.
const (
	offlineQuota        = 60               // pool units per window (granular)
	offlineClassicQuota = 600              // pool units per window (classic)
	offlineSearchQuota  = 4                // search units per window (granular)
	offlineWindow       = 10 * time.Second // instead of the Pacific day
)

// parseFlags reads the command line; env looks up environment variables
// (os.Getenv). Errors are *usageError naming the flag, or flag.ErrHelp.
func parseFlags(args []string, env func(string) string, usage io.Writer) (*config, error) {
	c := &config{set: map[string]bool{}}
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var keys, regions, shares string
	fs.StringVar(&c.redis, "redis", "", "Redis `URL` (redis:// or rediss://); several comma-separated addresses mean a cluster, a query naming master_name a Sentinel master set; empty runs an in-process Redis")
	fs.StringVar(&c.api, "api", defaultAPI, "API base `URL`")
	fs.StringVar(&keys, "keys", "", "API keys `K1,K2` of one Cloud project (default $YOUTUBE_API_KEYS); none runs offline against a simulated API")
	fs.StringVar(&c.table, "table", "granular", "cost `table`: classic or granular")
	// The flags whose default depends on -keys print no default of the
	// flag package's: their usage says both.
	fs.Int64Var(&c.quota, "quota", 0, fmt.Sprintf("pool units per window of the shared project `N` (default %d; offline %d, or %d with -table classic)",
		defaultQuota, offlineQuota, offlineClassicQuota))
	fs.DurationVar(&c.window, "window", 0, fmt.Sprintf("a sliding window of `D` replaces the Pacific day, e.g. 10s (default the Pacific day; offline %v)", offlineWindow))
	reserve := fs.String("reserve", "", "keep `N` units below the quota (default 5% of -quota)")
	fs.StringVar(&regions, "regions", "US,GB,DE,FR,IN,BR,AU,CA", "the regions to ingest, `US,GB,...`")
	fs.StringVar(&c.policy, "policy", "wait", "on refusal, `wait` for a turn, or error: stop that region's pass cleanly")
	fs.DurationVar(&c.duration, "duration", 0, "start passes until `D` has passed; passes under way then finish (default one pass per region)")
	fs.DurationVar(&c.maxWait, "max-wait", 0, "with -policy wait, wait at most `D` for a turn (default three windows, or 10m of the Pacific day)")
	fs.Int64Var(&c.searchQuota, "search-quota", 0, fmt.Sprintf("the granular table's search bucket: `N` units per window, one per search.list call (default %d; offline %d)",
		defaultSearchQuota, offlineSearchQuota))
	fs.StringVar(&shares, "shares", "", "give each region its share of the pool: `equal`, or weights US=2,GB=1 (regions not named weigh 1); the window becomes a fixed one")
	fs.Float64Var(&c.pace, "pace", -1, "pace the pool's window over its length, `B` of it free at its start, e.g. 0.1; the window becomes a fixed one")
	fs.StringVar(&c.simulate, "simulate", "", "serve only the simulated YouTube API on this `address` (e.g. 127.0.0.1:8089), for several ingest processes to share")
	fs.Usage = func() {} // errors are one line; -h prints the flags below
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(usage, "usage: go run ./examples/ingest [flags]")
			fs.SetOutput(usage)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })

	if keys == "" {
		keys = env("YOUTUBE_API_KEYS")
	}
	c.keys = splitList(keys)
	c.offline = len(c.keys) == 0 && c.simulate == ""
	c.regions = splitList(regions)
	if !c.set["quota"] {
		c.quota = defaultQuota
	}
	if !c.set["search-quota"] {
		c.searchQuota = defaultSearchQuota
	}
	if c.offline {
		// A day of quota would take a day to show anything: scale it down
		// so that the demo runs out of quota, and gets it back, within
		// seconds. Flags given on the command line still win.
		if !c.set["quota"] {
			c.quota = offlineQuota
			if c.table == "classic" {
				c.quota = offlineClassicQuota // a search.list alone costs 100
			}
		}
		if !c.set["window"] {
			c.window = offlineWindow
		}
		if !c.set["search-quota"] {
			c.searchQuota = offlineSearchQuota
		}
	}

	switch {
	case c.quota <= 0:
		return nil, usagef("-quota must be positive, got %d", c.quota)
	case c.searchQuota <= 0:
		return nil, usagef("-search-quota must be positive, got %d", c.searchQuota)
	case c.set["window"] && c.window <= 0:
		// 0 is how the flag package spells "not given": given, it would
		// silently mean the Pacific day.
		return nil, usagef("-window must be positive, got %v (leave it out for the Pacific day)", c.window)
	case c.duration < 0:
		return nil, usagef("-duration must not be negative, got %v", c.duration)
	case c.maxWait < 0:
		return nil, usagef("-max-wait must not be negative, got %v", c.maxWait)
	case c.table != "classic" && c.table != "granular":
		return nil, usagef("-table must be classic or granular, got %q", c.table)
	case c.policy != "wait" && c.policy != "error":
		return nil, usagef("-policy must be wait or error, got %q", c.policy)
	case len(c.regions) == 0:
		return nil, usagef("-regions names no region")
	}
	for _, r := range c.regions {
		if len(r) != 2 || strings.ToUpper(r) != r || strings.ContainsFunc(r, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			return nil, usagef("-regions: %q is not a two-letter region code", r)
		}
	}
	if err := checkURL("-api", c.api, "http", "https"); err != nil {
		return nil, err
	}
	if c.redis != "" {
		for _, a := range splitList(c.redis) {
			if strings.Contains(a, "://") {
				if err := checkURL("-redis", a, "redis", "rediss"); err != nil {
					return nil, err
				}
			} else if !isHostPort(a) {
				return nil, usagef("-redis: %q is not a URL or a host:port", a)
			}
		}
	}
	if *reserve == "" {
		c.reserve = (c.quota*5 + 99) / 100
	} else {
		n, err := strconv.ParseInt(*reserve, 10, 64)
		if err != nil || n < 0 {
			return nil, usagef("-reserve must be a number of units, zero or more, got %q", *reserve)
		}
		c.reserve = n
	}
	if c.reserve >= c.quota {
		return nil, usagef("-reserve %d leaves nothing of -quota %d", c.reserve, c.quota)
	}
	if c.set["pace"] && !(c.pace >= 0 && c.pace <= 1) {
		return nil, usagef("-pace must be between 0 and 1, got %v", c.pace)
	}
	if c.set["shares"] {
		w, err := parseShares(shares, c.regions)
		if err != nil {
			return nil, err
		}
		c.shares = w
	}
	for _, k := range c.keys {
		if strings.ContainsAny(k, " \t\r\n") {
			return nil, usagef("-keys: a key contains white space")
		}
	}
	return c, nil
}

// parseShares reads -shares: "equal" (each region weighs 1), or weights
// "US=2,GB=1" of regions among regions (the others weigh 1).
func parseShares(spec string, regions []string) (map[string]float64, error) {
	w := make(map[string]float64, len(regions))
	for _, r := range regions {
		w[r] = 1
	}
	if spec == "equal" {
		return w, nil
	}
	items := splitList(spec)
	if len(items) == 0 {
		return nil, usagef("-shares: say equal, or weights such as US=2,GB=1")
	}
	for _, item := range items {
		region, weight, ok := strings.Cut(item, "=")
		f, err := strconv.ParseFloat(weight, 64)
		if !ok || err != nil || !(f > 0) || f > 1e6 {
			return nil, usagef("-shares: %q is not REGION=WEIGHT with a positive weight", item)
		}
		if _, ok := w[region]; !ok {
			return nil, usagef("-shares: %q names a region -regions does not", region)
		}
		w[region] = f
	}
	return w, nil
}

// checkURL reports a URL that does not parse or has the wrong scheme.
func checkURL(flagName, raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return usagef("%s: %q is not a URL", flagName, raw)
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return nil
		}
	}
	return usagef("%s: scheme %q is not one of %s", flagName, u.Scheme, strings.Join(schemes, ", "))
}

// isHostPort accepts "host:port" with a host and a port number.
func isHostPort(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p <= 65535
}

// splitList splits a comma-separated list, dropping empty items and spaces.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
