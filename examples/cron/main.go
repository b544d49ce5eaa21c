// Command cron is the program a team deploys: a job that cron starts in
// each region every few minutes, each run reading the region's most
// popular videos with one YouTube API key, every run of every region
// sharing the Cloud project's quota through one Redis.
//
// It is configured by its environment, as cron jobs and containers are:
//
//	TOLLGATE_REDIS   the shared Redis's URL (redis://, rediss://; several
//	                 comma-separated addresses mean a Cluster, a query
//	                 naming master_name a Sentinel master set); required
//	YOUTUBE_API_KEY  the API key; required
//	REGION           the region code, e.g. GB; default US
//	PAGES            the pages of 50 videos to read; default 4
//	MAX_WAIT         the longest a call waits for its turn, e.g. 2m;
//	                 default 1m
//	YOUTUBE_API      the API's base URL; default
//	                 https://youtube.googleapis.com/youtube/v3 (another host,
//	                 such as a simulator or a proxy, is metered as YouTube)
//	YOUTUBE_QUOTA    the project's pool units a day; default 10,000
//	YOUTUBE_WINDOW   a sliding window replacing the Pacific day, e.g. 10s,
//	                 for a simulated API whose day is seconds
//
// Its policy: a call with no room waits its turn, in arrival order across
// every process, up to MAX_WAIT; a call that would wait longer is not
// made, and the run ends with exit status 75 (EX_TEMPFAIL: the next run
// tries again). While Redis is down, nothing is sent (fail closed): a
// quota nobody counts is a quota overspent. It prints one line, e.g.
//
//	GB: 4 pages, 200 videos, 4 units, waited 0s; project: 9,476 of 9,500 units left in the window
//
// and exits 0, 75 when the quota had no room in time, 1 for anything
// else (a message on stderr). Warnings about the Redis itself (an evicting
// maxmemory-policy, no append-only file) go to stderr once per run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/youtube"
)

// exitTempFail is sysexits.h's EX_TEMPFAIL: the quota had no room in
// time; the next run tries again.
const exitTempFail = 75

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Getenv)
	stop()
	var qe *tollgate.QuotaError
	switch {
	case errors.As(err, &qe):
		fmt.Fprintf(os.Stderr, "cron: no room in the quota within MAX_WAIT (%d units of %q, retry in %v)\n", qe.Units, qe.Bucket, qe.RetryAfter.Round(time.Second))
		os.Exit(exitTempFail)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cron:", err)
		os.Exit(1)
	}
}

// run reads the environment, builds the Transport, reads the pages, and
// prints what it did.
func run(ctx context.Context, getenv func(string) string) error {
	region := or(getenv("REGION"), "US")
	api := or(getenv("YOUTUBE_API"), "https://youtube.googleapis.com/youtube/v3")
	key := getenv("YOUTUBE_API_KEY")
	if key == "" || getenv("TOLLGATE_REDIS") == "" {
		return errors.New("set TOLLGATE_REDIS (the shared Redis's URL) and YOUTUBE_API_KEY")
	}
	pages, err := strconv.Atoi(or(getenv("PAGES"), "4"))
	if err != nil || pages < 1 {
		return fmt.Errorf("PAGES %q: want a number of pages, at least 1", getenv("PAGES"))
	}
	maxWait, err := time.ParseDuration(or(getenv("MAX_WAIT"), "1m"))
	if err != nil || maxWait <= 0 {
		return fmt.Errorf("MAX_WAIT %q: want a Go duration, e.g. 2m", getenv("MAX_WAIT"))
	}
	var waited atomic.Int64 // nanoseconds the calls waited for their turn
	opts := &youtube.Options{Tollgate: tollgate.Config{
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.WaitTurn, MaxWait: maxWait, OnOutage: tollgate.FailClosed}, nil),
		Name:   "cron-" + region, // who spends, in tollgate status
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
			waited.Add(int64(d.Waited))
		}},
	}}
	if opts.Quota, err = number(getenv, "YOUTUBE_QUOTA"); err != nil {
		return err
	}
	if w := getenv("YOUTUBE_WINDOW"); w != "" {
		if opts.Window, err = time.ParseDuration(w); err != nil || opts.Window <= 0 {
			return fmt.Errorf("YOUTUBE_WINDOW %q: want a Go duration, e.g. 10s", w)
		}
	}
	u, err := url.Parse(api)
	if err != nil || u.Host == "" {
		return fmt.Errorf("YOUTUBE_API %q: want a URL such as https://youtube.googleapis.com/youtube/v3", api)
	}
	if !slices.Contains(youtube.DefaultHosts, u.Hostname()) {
		opts.Table = youtube.Granular(u.Host) // a simulator or a proxy: meter its host
	}

	rdb, err := redisClient(getenv("TOLLGATE_REDIS"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	tr, err := youtube.NewTransport([]string{key}, rdb, opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: maxWait + 30*time.Second}

	var videos, done int
	token := ""
	for done < pages {
		q := url.Values{"part": {"snippet"}, "chart": {"mostPopular"}, "regionCode": {region}, "maxResults": {"50"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/videos?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Items         []json.RawMessage `json:"items"`
			NextPageToken string            `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("videos.list: %s", resp.Status)
		}
		if err != nil {
			return fmt.Errorf("videos.list: reading the answer: %w", err)
		}
		done++
		videos += len(page.Items)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	usage, err := tr.Usage(ctx, youtube.DefaultProject, youtube.Pool)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d pages, %d videos, %d units, waited %v; project: %d of %d units left in the window\n",
		region, done, videos, done, time.Duration(waited.Load()).Round(time.Second), usage[0].Remaining, usage[0].Limit.Units)
	return nil
}

// or returns v, or def when v is empty.
func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// number reads a positive whole number from the environment; 0 when the
// variable is unset (the default).
func number(getenv func(string) string, name string) (int64, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive whole number", name, v)
	}
	return n, nil
}

// redisClient connects to the shared Redis: one URL, several
// comma-separated addresses of a Cluster, or a Sentinel URL (its query
// names master_name, as redis.ParseFailoverURL reads it; decisions then
// wait for a replica, quota.WithReplicas). It notices an outage quickly,
// and a call's deadline bounds its decision too.
func redisClient(spec string) (redis.UniversalClient, error) {
	if u, err := url.Parse(spec); err == nil && u.Query().Has("master_name") {
		opt, err := redis.ParseFailoverURL(spec)
		if err != nil {
			return nil, fmt.Errorf("TOLLGATE_REDIS: %w", err)
		}
		opt.DialTimeout, opt.MaxRetries, opt.ContextTimeoutEnabled = time.Second, 2, true
		return redis.NewFailoverClient(opt), nil
	}
	if strings.Contains(spec, ",") {
		c := &redis.ClusterOptions{DialTimeout: time.Second, MaxRetries: 2, ContextTimeoutEnabled: true}
		for _, a := range strings.Split(spec, ",") {
			opt, err := redis.ParseURL(strings.TrimSpace(a))
			if err != nil {
				return nil, fmt.Errorf("TOLLGATE_REDIS: %w", err)
			}
			c.Addrs = append(c.Addrs, opt.Addr)
			c.Username, c.Password, c.TLSConfig = opt.Username, opt.Password, opt.TLSConfig
		}
		return redis.NewClusterClient(c), nil
	}
	opt, err := redis.ParseURL(spec)
	if err != nil {
		return nil, fmt.Errorf("TOLLGATE_REDIS: %w", err)
	}
	opt.DialTimeout, opt.MaxRetries, opt.ContextTimeoutEnabled = time.Second, 2, true
	return redis.NewClient(opt), nil
}
