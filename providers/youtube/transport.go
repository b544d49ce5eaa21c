package youtube

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// DefaultPool names the pool of the keys given to NewTransport when
// Options.Pools is nil.
const DefaultPool = "default"

// Options tune NewTransport; the zero value means the defaults.
type Options struct {
	// Pools groups API keys by the Cloud project that owns them: pool name
	// (e.g. the project id) to keys. Keys in one pool share one quota, since
	// the quota is the project's. nil puts every key in DefaultPool.
	Pools map[string][]string

	// Table is the cost table; zero means Granular() for DefaultHosts.
	Table costs.Spec

	// Quota is the pool's units a day (or per Window); 0 means DefaultQuota.
	Quota int64
	// SearchQuota, UploadQuota and BatchStatsQuota are the granular model's
	// own buckets, in calls a day (or per Window); 0 means their defaults.
	SearchQuota, UploadQuota, BatchStatsQuota int64
	// Window, when set, replaces the Pacific day with a sliding window of
	// this length, for tests and demos against an upstream that resets
	// more often.
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

	// Policy, Lease, Transit, LocalShare, Base, OnDecision, OnSwitch and
	// Logger are passed to the tollgate.Transport. When Policy fails over,
	// the routes are the pools in name order, each with its own key.
	Policy     tollgate.PolicyFunc
	Lease      tollgate.LeaseFunc
	Transit    time.Duration
	LocalShare float64
	Base       http.RoundTripper
	OnDecision tollgate.DecisionHook
	OnSwitch   tollgate.SwitchHook
	Logger     *slog.Logger
}

// Transport meters YouTube Data API calls. It is a tollgate.Transport that
// also sends an API key (in the X-Goog-Api-Key header, never in the URL)
// with requests that carry none. Close it when done.
type Transport struct {
	*tollgate.Transport
	key   string         // sent with requests that carry no key
	owned *quota.Limiter // the embedded Redis, when NewTransport started one
}

// NewTransport returns a ready http.RoundTripper for the YouTube Data API
// from API keys, a Redis client shared by every process spending the same
// projects (nil runs an in-process Redis, for a single process), and
// options (nil for the defaults).
//
// Requests may carry a key (the key query parameter or X-Goog-Api-Key);
// the key's pool is the scope. Requests without one get the first key of
// the first pool.
func NewTransport(keys []string, rdb redis.UniversalClient, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	pools := opts.Pools
	if pools == nil {
		pools = map[string][]string{DefaultPool: keys}
	} else if len(keys) > 0 {
		return nil, errors.New("youtube: give keys either as the keys argument or in Options.Pools, not both")
	}
	scope, routes, first, err := poolScopes(pools)
	if err != nil {
		return nil, err
	}
	table := opts.Table
	if len(table.Rules) == 0 {
		table = Granular()
	}
	ct, err := costs.New(table)
	if err != nil {
		return nil, fmt.Errorf("youtube: %w", err)
	}
	buckets := opts.buckets()

	t := &Transport{key: first}
	lim := (*quota.Limiter)(nil)
	if rdb == nil {
		if lim, err = quota.NewEmbedded(); err != nil {
			return nil, fmt.Errorf("youtube: %w", err)
		}
		t.owned = lim
	} else {
		lim = quota.New(rdb)
	}
	reset := NextReset
	if opts.Window > 0 {
		w := opts.Window
		reset = func(now time.Time) time.Time { return now.Add(w) }
	}
	t.Transport = &tollgate.Transport{
		Base:       opts.Base,
		Limiter:    lim,
		Costs:      ct,
		Buckets:    buckets,
		Scope:      scope,
		Policy:     opts.Policy,
		Lease:      opts.Lease,
		Transit:    opts.Transit,
		Routes:     routes,
		LocalShare: opts.LocalShare,
		Upstream:   Upstream(reset),
		OnDecision: opts.OnDecision,
		OnSwitch:   opts.OnSwitch,
		Logger:     opts.Logger,
	}
	return t, nil
}

// RoundTrip sends req through the quota, with the default key when it
// carries none.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.key != "" && keyOf(req) == "" && tollgate.BearerToken(req) == "" {
		req = req.Clone(req.Context())
		req.Header.Set(keyHeader, t.key)
	}
	return t.Transport.RoundTrip(req)
}

// Close releases the Transport, and the in-process Redis if NewTransport
// started one.
func (t *Transport) Close() error {
	err := t.Transport.Close()
	if t.owned != nil {
		err = errors.Join(err, t.owned.Close())
	}
	return err
}

// Limiter returns the limiter the Transport spends from, for status
// displays (quota.Limiter.Usage).
func (t *Transport) Limiter() *quota.Limiter { return t.Transport.Limiter }

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
