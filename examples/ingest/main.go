// Command ingest is a trending-video ingestion job for several regions
// that share one YouTube Data API quota through tollgate.
//
// Each region's pass reads the mostPopular chart page by page, the channels
// seen in it by batches of 50, and one search. Every call goes through a
// youtube.Transport, so all regions, in this process and in any other
// started with the same -redis, spend one project's quota and stop (or
// wait their turn) before YouTube would refuse them.
//
// With no API keys it runs offline: a simulated YouTube API (with its own
// quota and real 403 quotaExceeded answers) in this process, the embedded
// Redis, and a quota and window scaled down to seconds:
//
//	go run ./examples/ingest
//	go run ./examples/ingest -policy error
//	go run ./examples/ingest -keys "$YOUTUBE_API_KEYS" -redis redis://localhost:6379
//
// -shares gives each region its share of the pool (equal, or weights such
// as US=2), and -pace 0.1 paces the pool's window over its length; the
// summary then says what each region spent against its share
// (docs/shares.md):
//
//	go run ./examples/ingest -shares equal -pace 0.1 -duration 30s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redisurl"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is the whole program; it returns the exit code: 0 done, 1 failed,
// 2 bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	c, err := parseFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if c.simulate != "" {
		return serveSimulation(ctx, c, stdout, stderr)
	}
	if err := ingest(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "ingest:", err)
		return 1
	}
	return 0
}

// ingest runs the regional workers and prints their report.
func ingest(ctx context.Context, c *config, out io.Writer) error {
	rdb, err := connectRedis(ctx, c.redis)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}

	base, keys := c.api, c.keys
	var sim *ytsim.Server
	if c.offline {
		sim = newSimulation(c)
		srv := httptest.NewServer(sim)
		defer srv.Close()
		base, keys = srv.URL+"/youtube/v3", []string{"offline-demo-key"}
	}
	host, _ := url.Parse(base)

	rep := newReport(out, c.regions)
	pol := tollgate.Policy{OnRefusal: tollgate.WaitTurn, MaxWait: c.waitLimit()}
	if c.policy == "error" {
		pol.OnRefusal = tollgate.Refuse
	}
	table := youtube.Granular(host.Host)
	if c.table == "classic" {
		table = youtube.Classic(host.Host)
	}
	opts := &youtube.Options{
		Table:          table,
		Quota:          c.quota,
		SearchQuota:    c.searchQuota,
		Window:         c.window,
		ReservePercent: -1,
		Tollgate: tollgate.Config{
			Policy: tollgate.Policies(pol, nil),
			Trace:  tollgate.Trace{WaitStarted: rep.waiting, WaitEnded: rep.waitEnded, Decided: rep.decision},
		},
	}
	if c.reserve > 0 {
		// The reserve is given in pool units; keep the same share of
		// every bucket.
		opts.ReservePercent = 100 * float64(c.reserve) / float64(c.quota)
	}
	if c.fair() {
		opts.Buckets = map[string]tollgate.Bucket{youtube.Pool: c.fairPool(time.Now())}
		if c.window > 0 {
			// The simulated API's windows start on multiples of -window:
			// the fixed windows follow them exactly, with no Transit to
			// lengthen them.
			opts.Tollgate.Transit = -1
		}
	}
	tr, err := youtube.NewTransport(keys, rdb, opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	a := &api{client: &http.Client{Transport: tr}, base: base}

	fmt.Fprintln(out, c.describe(base, rdb != nil))
	// -duration is how long passes start: a pass begun before the time
	// is up runs to its end, its calls waiting their turns (up to
	// -max-wait) as a cron's run would, and a region stops once its next
	// pass would begin after the end. When the end bounded the calls'
	// waits instead, far processes on a loaded machine saw every region
	// refused a window before the end, the last window left unused (see
	// TestFarRegion). Ctrl-C stops everything at once.
	end := time.Now().Add(c.duration)
	over := func(after time.Duration) bool { return !time.Now().Add(after).Before(end) }
	sleep := func(d time.Duration) bool { // false when interrupted
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	// Regions run side by side; one region's failure ends its own passes,
	// not the others'.
	var regions errgroup.Group
	for _, region := range c.regions {
		regions.Go(func() error {
			rctx := withRegion(ctx, region)
			if c.shares != nil {
				rctx = tollgate.WithCaller(rctx, region) // the region is the tenant
			}
			for n := 1; ; n++ {
				res, err := a.pass(rctx, region)
				if c.duration > 0 && errors.Is(err, tollgate.ErrUnavailable) {
					// Redis is down (a failover under way): the endpoint
					// fails closed; try again shortly, as a cron's next
					// run would.
					rep.unavailable(region, n, res)
					if over(outageRetry) || !sleep(outageRetry) {
						return nil
					}
					continue
				}
				rep.passDone(rctx, region, n, res, err)
				if c.duration == 0 || ctx.Err() != nil {
					return nil
				}
				var qe *tollgate.QuotaError
				if errors.As(err, &qe) {
					// Stopped cleanly: come back when the quota does, as
					// a cron job would; a pause is looked at again every
					// pauseRecheck, since an operator may lift it early.
					back := qe.RetryAfter
					if qe.Cause.Paused() {
						back = min(back, pauseRecheck)
					}
					if over(back) || !sleep(back) {
						return nil
					}
				} else if err != nil {
					return nil
				}
				if over(0) {
					return nil
				}
			}
		})
	}
	regions.Wait()

	fmt.Fprintln(out)
	buckets := []string{youtube.Pool}
	if c.table == "granular" {
		buckets = append(buckets, youtube.Search)
	}
	rep.table(buckets)
	units, upstream, failed := rep.totals()
	// What the Transport enforces: each quota less its reserve.
	enforced := func(bucket string) int64 {
		u, err := tr.Usage(ctx, youtube.DefaultProject, bucket)
		if err != nil || len(u) == 0 {
			return 0
		}
		return u[0].Limit.Units
	}
	quotas := map[string]int64{youtube.Pool: c.quota, youtube.Search: c.searchQuota}
	limits := map[string]int64{}
	var spent []string
	fmt.Fprint(out, "\nquota:")
	for i, b := range buckets {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		limits[b] = enforced(b)
		fmt.Fprintf(out, "%s %d %s units per %s, %d after the reserve", sep, quotas[b], b, c.windowName(), limits[b])
		spent = append(spent, fmt.Sprintf("%d %s units", units[b], b))
	}
	fmt.Fprintf(out, "; spent %s in all\n", strings.Join(spent, " and "))
	if c.shares != nil {
		fmt.Fprintln(out, rep.shares(c, limits[youtube.Pool]))
	}
	if sim != nil {
		upstream = simulatedQuotaErrors(sim)
		fmt.Fprintf(out, "most units the upstream received in one of its %s windows: %s\n",
			c.window, mostReceived(sim.Arrivals(), buckets, quotas, limits, c.window, rep.binding(buckets)))
	}
	fmt.Fprintf(out, "upstream quota errors: %d\n", upstream)
	if failed > 0 {
		return fmt.Errorf("%d passes failed", failed)
	}
	return nil
}

// pauseRecheck is how often a region a pause refused tries again before
// the pause's announced end: a resume lifts it early.
const pauseRecheck = time.Second

// outageRetry is how long a region waits before its next pass when Redis
// could not be reached and its calls failed closed.
const outageRetry = 500 * time.Millisecond

// fair reports whether the pool has shares or a pace.
func (c *config) fair() bool { return c.shares != nil || c.pace >= 0 }

// fairPool is the pool bucket with -shares and -pace: on the Pacific day,
// or on fixed windows of -window that start on its multiples since the
// Unix epoch (as the simulated API's do), the one holding now first.
func (c *config) fairPool(now time.Time) tollgate.Bucket {
	pacific, err := time.LoadLocation("America/Los_Angeles") // quota embeds the zones
	if err != nil {
		pacific = time.UTC
	}
	lim := quota.PerDay(c.quota, pacific)
	if c.window > 0 {
		lim = quota.PerFixedWindow(c.quota, c.window, now.Truncate(c.window).Add(c.window))
	}
	b := tollgate.Bucket{Limits: []quota.Limit{lim}}
	if c.reserve > 0 {
		b.ReservePercent = 100 * float64(c.reserve) / float64(c.quota)
	}
	if c.shares != nil {
		b.Shares = &tollgate.Shares{Weights: c.shares}
	}
	if c.pace >= 0 {
		b.Pace = &tollgate.Pace{Burst: c.pace}
	}
	return b
}

// waitLimit is how long a call may wait for its turn: -max-wait, else
// three windows (enough for a queue of regions a few windows deep), else
// ten minutes of the Pacific day.
func (c *config) waitLimit() time.Duration {
	switch {
	case c.maxWait > 0:
		return c.maxWait
	case c.window > 0:
		return 3*c.window + time.Second
	}
	return 10 * time.Minute
}

// windowName describes the window, e.g. "10s" or "Pacific day".
func (c *config) windowName() string {
	if c.window > 0 {
		return c.window.String()
	}
	return "Pacific day"
}

// describe is the first line of the output: what runs against what.
func (c *config) describe(base string, sharedRedis bool) string {
	where := "embedded Redis (this process only)"
	if sharedRedis {
		where = "Redis " + redactURL(c.redis)
	}
	api := "YouTube API at " + base
	if c.offline {
		api = "simulated YouTube API at " + base + " (offline: no -keys)"
	}
	return fmt.Sprintf("tollgate ingest: %d regions, %s table, -policy %s, %s; %s",
		len(c.regions), c.table, c.policy, where, api)
}

// connectRedis returns a client for -redis (nil for the embedded Redis),
// after checking within a few seconds that it answers and, for a Sentinel
// URL, that its master has the replica each decision waits for.
func connectRedis(ctx context.Context, spec string) (redis.UniversalClient, error) {
	if spec == "" {
		return nil, nil
	}
	client, err := redisurl.Client(spec)
	if err != nil {
		return nil, fmt.Errorf("-redis %s: %v", redactURL(spec), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", redactURL(spec), err)
	}
	if redisurl.IsSentinel(spec) {
		lim, err := quota.New(client)
		if err == nil {
			err = lim.Ping(pctx, "replicas")
		}
		if err != nil {
			client.Close()
			return nil, redisurl.NoReplica(spec, err)
		}
	}
	return client, nil
}

// redactURL says which Redis -redis names, without its passwords: a
// Sentinel URL as its master set and sentinels.
func redactURL(s string) string { return redisurl.Describe(s) }
