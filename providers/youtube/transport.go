package youtube

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
	"github.com/tollgate/tollgate/internal/provider"
	"github.com/tollgate/tollgate/quota"
)

// DefaultProject names the project of the keys given to NewTransport
// when Options.Projects is nil; it is the scope their requests spend, e.g.
// for Transport.Usage. (Pool, beside it, is a bucket: the project's daily
// units.)
const DefaultProject = "default"

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Base sends the requests that are admitted. nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// Projects groups API keys by the Cloud project that owns them: a name
	// (e.g. the project id) to keys. Keys of one project share one quota,
	// since the quota is the project's; each project is a scope. nil puts
	// every key in DefaultProject.
	Projects map[string][]string
	// TokenProject names the project of the requests authorized by an
	// OAuth token alone, with no API key (e.g. uploads): the Cloud project
	// that owns the OAuth client. Empty means the only project; with
	// several, such requests fail, since a token does not tell its project.
	TokenProject string

	// Table is the cost table; zero means Granular() for DefaultHosts.
	// Its rules for upload paths that have no Func (set by Override, or
	// loaded from JSON) are given one that tells the requests to an upload
	// session (free, never paused) from the calls, as in Classic.
	Table costs.Spec

	// Quota is the pool's units a day (or per Window); 0 means DefaultQuota.
	Quota int64
	// SearchQuota and UploadQuota are the granular model's own buckets,
	// and BatchStatsQuota videos.batchGetStats's in both models, in calls a
	// day (or per Window); 0 means their defaults.
	SearchQuota, UploadQuota, BatchStatsQuota int64
	// Window, when set, replaces the Pacific day with a sliding window of
	// this length (and UploadLimitPause with Window), for tests and demos
	// against an upstream that resets more often.
	Window time.Duration
	// ReserveUnits is kept below every quota. When zero, ReservePercent is
	// kept instead: 0 means DefaultReservePercent, a negative value none.
	ReserveUnits   int64
	ReservePercent float64
	// Smoothing adds limits of your own to the pool, e.g.
	// quota.PerWindow(420, time.Hour) to spend a day's quota over the day.
	Smoothing []quota.Limit
	// Buckets adds or replaces the limits of buckets, for tables you
	// extended with buckets of your own.
	Buckets map[string]tollgate.Bucket

	// Tollgate holds the Transport's other settings: Policy, Lease,
	// Transit, Local and LocalShare, the hooks and Logger, and Routes of
	// your own (tried after the pools, e.g. a cache). NewTransport fills in
	// the rest from the fields above and its arguments: setting Base,
	// Limiter, Costs, Buckets, Scope or Upstream here is an error. When
	// Policy fails over, the routes are the pools in name order, each with
	// its own key.
	Tollgate tollgate.Config
}

// Transport meters YouTube Data API calls. It is a tollgate.Transport that
// also sends an API key (in the X-Goog-Api-Key header, never in the URL)
// with requests that carry none, and refuses for a while the video uploads
// of a credential that YouTube answered 400 uploadLimitExceeded (see
// UploadLimitPause). Close it when done.
type Transport struct {
	*tollgate.Transport
	key credential // sent with requests that carry no key; nil for none
	kit *provider.Kit

	costs       *costs.Table // the Transport's, to find video uploads
	uploads     *uploaders   // credentials whose video uploads are paused
	uploadPause time.Duration
	logger      *slog.Logger
	now         func() time.Time
}

// NewTransport returns a ready http.RoundTripper for the YouTube Data API
// from API keys, a Redis client shared by every process spending the same
// projects (nil runs an in-process Redis, for a single process), and
// options (nil for the defaults). It checks the whole configuration: an
// error here is one the first request would otherwise meet.
//
// Requests may carry a key (the key query parameter or X-Goog-Api-Key);
// the key's project is the scope. Requests with neither a key nor an OAuth
// token (Authorization: Bearer) get the first key of the first project;
// requests with a token alone spend Options.TokenProject. Prefer the header:
// a key in the URL appears in the *url.Error that net/http returns when a
// request fails to send.
func NewTransport(keys []string, rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	pools := opts.Projects
	if pools == nil {
		pools = map[string][]string{DefaultProject: keys}
	} else if len(keys) > 0 {
		return nil, errors.New("youtube: give keys either as the keys argument or in Options.Projects, not both")
	}
	if _, ok := pools[opts.TokenProject]; opts.TokenProject != "" && !ok {
		return nil, fmt.Errorf("youtube: Options.TokenProject %q is not one of Options.Projects", opts.TokenProject)
	}
	scope, routes, first, err := projectScopes(pools, opts.TokenProject)
	if err != nil {
		return nil, err
	}
	cfg.Scope = scope
	cfg.Routes = append(routes, cfg.Routes...)

	t := &Transport{costs: cfg.Costs, uploads: &uploaders{}, uploadPause: UploadLimitPause, logger: cfg.Logger, now: time.Now}
	if opts.Window > 0 {
		t.uploadPause = opts.Window
	}
	if first != "" {
		t.key = newCredential(first)
	}
	if t.kit, err = provider.Start("youtube", rdb); err != nil {
		return nil, err
	}
	if t.Transport, err = t.kit.New(cfg); err != nil {
		return nil, t.kit.Fail(err)
	}
	return t, nil
}

// config checks the options and assembles the tollgate.Config they ask
// for, all but the scope, routes and limiter.
func (o *Options) config() (tollgate.Config, error) {
	cfg := o.Tollgate
	owned := provider.Owned{Provider: "youtube", Upstream: "YouTube", Buckets: "Options.Buckets",
		Scope: "the scope is the project of the request's key (Options.Projects)"}
	if err := owned.Check(cfg); err != nil {
		return cfg, err
	}
	for name, v := range map[string]int64{
		"Quota": o.Quota, "SearchQuota": o.SearchQuota, "UploadQuota": o.UploadQuota,
		"BatchStatsQuota": o.BatchStatsQuota, "ReserveUnits": o.ReserveUnits,
	} {
		if v < 0 {
			return cfg, fmt.Errorf("youtube: Options.%s is %d; it must not be negative", name, v)
		}
	}
	if o.Window < 0 {
		return cfg, fmt.Errorf("youtube: Options.Window is %v; it must not be negative", o.Window)
	}
	table := o.Table
	if len(table.Rules) == 0 {
		table = Granular()
	}
	ct, err := costs.New(withSessions(table))
	if err != nil {
		return cfg, fmt.Errorf("youtube: %w", err)
	}
	reset := NextReset
	if o.Window > 0 {
		w := o.Window
		reset = func(now time.Time) time.Time { return now.Add(w) }
	}
	cfg.Base, cfg.Costs, cfg.Buckets, cfg.ReadResponse = o.Base, ct, o.buckets(), Upstream(reset)
	return cfg, nil
}

// RoundTrip sends req through the quota, with the default key when it
// carries neither a key nor an OAuth token. A video upload call
// (videos.insert) by a credential whose uploads are paused is refused
// with a *tollgate.QuotaError whose Upstream is set; one that YouTube
// answers 400 uploadLimitExceeded pauses them, and returns such an error
// too.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.key != nil && keyOf(req) == "" && header.Bearer(req) == "" {
		req = req.Clone(req.Context())
		req.Header.Set(keyHeader, t.key())
	}
	var resp *http.Response
	var err error
	if e, ok := t.videoUpload(req); ok {
		resp, err = t.upload(req, e)
	} else {
		resp, err = t.Transport.RoundTrip(req)
	}
	var unknown *costs.UnknownError
	if errors.As(err, &unknown) {
		err = t.otherHost(unknown, err)
	}
	return resp, err
}

// otherHost explains a request to a host the cost table has no rule for,
// such as a proxy or an emulator: the table must be given its host.
func (t *Transport) otherHost(unknown *costs.UnknownError, err error) error {
	host := unknown.Host
	if h, _, splitErr := net.SplitHostPort(host); splitErr == nil {
		host = h
	}
	var hosts []string
	for _, r := range t.costs.Spec().Rules {
		pattern := r.Pattern
		if _, rest, ok := strings.Cut(pattern, " "); ok {
			pattern = rest
		}
		h, _, _ := strings.Cut(pattern, "/")
		if h == host {
			return err // a host the table knows, a path it does not
		}
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return fmt.Errorf("youtube: the cost table has rules for %s, not %s: to meter calls sent there, give its host to the table, Options.Table: youtube.Granular(%q): %w",
		strings.Join(hosts, " and "), host, unknown.Host, err)
}

// Close releases the Transport, and the in-process Redis if NewTransport
// started one.
func (t *Transport) Close() error { return t.kit.Close() }

// buckets returns the limits of the granular and classic buckets.
func (o *Options) buckets() map[string]tollgate.Bucket {
	per := func(units int64, def int64) quota.Limit {
		if units == 0 {
			units = def
		}
		if o.Window > 0 {
			return quota.PerWindow(units, o.Window)
		}
		return quota.PerDay(units, pacific)
	}
	reserve := tollgate.Bucket{ReserveUnits: o.ReserveUnits}
	switch {
	case o.ReserveUnits != 0:
	case o.ReservePercent == 0:
		reserve.ReservePercent = DefaultReservePercent
	case o.ReservePercent > 0:
		reserve.ReservePercent = o.ReservePercent
	}
	bucket := func(limits ...quota.Limit) tollgate.Bucket {
		b := reserve
		b.Limits = limits
		return b
	}
	pool := append([]quota.Limit{per(o.Quota, DefaultQuota)}, o.Smoothing...)
	out := map[string]tollgate.Bucket{
		Pool:          bucket(pool...),
		Search:        bucket(per(o.SearchQuota, DefaultSearchQuota)),
		Upload:        bucket(per(o.UploadQuota, DefaultUploadQuota)),
		BatchGetStats: bucket(per(o.BatchStatsQuota, DefaultBatchStatsQuota)),
	}
	for name, b := range o.Buckets {
		out[name] = b
	}
	return out
}
