package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
)

// youtubeOptions are the youtube provider's options.
type youtubeOptions struct {
	Quota           int64   `json:"quota"`
	SearchQuota     int64   `json:"search_quota"`
	UploadQuota     int64   `json:"upload_quota"`
	BatchStatsQuota int64   `json:"batch_stats_quota"`
	Window          string  `json:"window"`
	Table           string  `json:"table"`
	Pool            string  `json:"pool"`
	ReservePercent  float64 `json:"reserve_percent"`
	ReserveUnits    int64   `json:"reserve_units"`
}

func (o *youtubeOptions) options(u *Upstream) (*youtube.Options, error) {
	w, err := duration("window", o.Window)
	if err != nil {
		return nil, err
	}
	opts := &youtube.Options{Quota: o.Quota, SearchQuota: o.SearchQuota, UploadQuota: o.UploadQuota,
		BatchStatsQuota: o.BatchStatsQuota, Window: w, ReservePercent: o.ReservePercent, ReserveUnits: o.ReserveUnits}
	host := u.target.Host
	switch o.Table {
	case "", "granular":
		opts.Table = youtube.Granular(host)
	case "classic":
		opts.Table = youtube.Classic(host)
	default:
		return nil, fmt.Errorf("option table %q: want classic or granular", o.Table)
	}
	return opts, nil
}

// youtubePool is the youtube provider's pool bucket, as it builds it from
// opts (a Pacific day, its reserve), with shares and pace.
func youtubePool(opts *youtube.Options, shares *tollgate.Shares, pace *tollgate.Pace) tollgate.Bucket {
	units := opts.Quota
	if units == 0 {
		units = youtube.DefaultQuota
	}
	pacific, err := time.LoadLocation("America/Los_Angeles") // quota embeds the zones
	if err != nil {
		pacific = time.UTC
	}
	b := tollgate.Bucket{Limits: []quota.Limit{quota.PerDay(units, pacific)}, ReserveUnits: opts.ReserveUnits, Shares: shares, Pace: pace}
	switch {
	case opts.ReserveUnits != 0:
	case opts.ReservePercent == 0:
		b.ReservePercent = youtube.DefaultReservePercent
	case opts.ReservePercent > 0:
		b.ReservePercent = opts.ReservePercent
	}
	return b
}

// youtubeKeys puts the upstream's key in its project (the "pool" option):
// opts.Projects when one is named, else the keys argument
// (youtube.DefaultProject).
func youtubeKeys(u *Upstream, pool string, opts *youtube.Options) []string {
	if pool == "" {
		if u.key == nil {
			return nil
		}
		return []string{u.key.get()}
	}
	opts.Projects = map[string][]string{pool: nil}
	if u.key != nil {
		opts.Projects[pool] = []string{u.key.get()}
	}
	return nil
}

func buildYouTube(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o youtubeOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	opts, err := o.options(u)
	if err != nil {
		return nil, err
	}
	opts.Base, opts.Tollgate = base, cfg
	shares, pace, err := u.fairness()
	if err != nil {
		return nil, err
	}
	if shares != nil || pace != nil {
		if opts.Window > 0 {
			return nil, errors.New("shares and pace divide and spread the Pacific day: leave out the option window")
		}
		opts.Buckets = map[string]tollgate.Bucket{youtube.Pool: youtubePool(opts, shares, pace)}
	}
	return youtube.NewTransport(youtubeKeys(u, o.Pool, opts), rdb, opts)
}
