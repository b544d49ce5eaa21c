package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// A BucketConfig is a custom bucket's limits (tollgate.Bucket).
type BucketConfig struct {
	// Limits are the upstream's quotas for the bucket.
	Limits []LimitConfig `json:"limits"`
	// ReservePercent is kept below every limit, e.g. 5.
	ReservePercent float64 `json:"reserve_percent"`
	// ReserveUnits is kept below every limit instead, e.g. 500.
	ReserveUnits int64 `json:"reserve_units"`
	// MaxInFlight caps the bucket's requests in flight at once; 0: none.
	MaxInFlight int `json:"max_in_flight"`
}

// A LimitConfig is units per window.
type LimitConfig struct {
	// Units is the units a window holds, e.g. 10000.
	Units int64 `json:"units"`
	// Window is a Go duration (a sliding window, e.g. "24h"), or "day":
	// the calendar day in Zone.
	Window string `json:"window"`
	// Zone is the day's time zone, e.g. "America/Los_Angeles"; default
	// UTC.
	Zone string `json:"zone"`
}

// limitsOf builds a custom bucket's limits.
func (b BucketConfig) limitsOf(name string) (tollgate.Bucket, error) {
	out := tollgate.Bucket{ReservePercent: b.ReservePercent, ReserveUnits: b.ReserveUnits, MaxInFlight: b.MaxInFlight}
	if len(b.Limits) == 0 {
		return out, fmt.Errorf("bucket %q has no limits", name)
	}
	for i, l := range b.Limits {
		if l.Units <= 0 {
			return out, fmt.Errorf("bucket %q limit %d: units must be positive", name, i)
		}
		if l.Window == "day" {
			zone := l.Zone
			if zone == "" {
				zone = "UTC"
			}
			loc, err := time.LoadLocation(zone)
			if err != nil {
				return out, fmt.Errorf("bucket %q limit %d: unknown zone %q", name, i, l.Zone)
			}
			out.Limits = append(out.Limits, quota.PerDay(l.Units, loc))
			continue
		}
		if l.Zone != "" {
			return out, fmt.Errorf("bucket %q limit %d: a zone goes with the window \"day\"", name, i)
		}
		d, err := time.ParseDuration(l.Window)
		if err != nil || d <= 0 {
			return out, fmt.Errorf("bucket %q limit %d: window %q: want a Go duration or \"day\"", name, i, l.Window)
		}
		out.Limits = append(out.Limits, quota.PerWindow(l.Units, d))
	}
	return out, nil
}

// loadCosts reads a custom upstream's cost table.
func loadCosts(path string) (*costs.Table, error) {
	if path == "" {
		return nil, errors.New("the custom provider needs \"costs\": a cost table file (costs.Load's JSON)")
	}
	t, err := costs.LoadFile(path)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	return t, nil
}

// customOptions are the custom provider's options.
type customOptions struct {
	// KeyHeader is the header the key is sent in; empty means
	// "Authorization: Bearer KEY".
	KeyHeader string `json:"key_header"`
}

func buildCustom(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o customOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	if o.KeyHeader != "" && http.CanonicalHeaderKey(o.KeyHeader) != "Authorization" && !validHeaderName(o.KeyHeader) {
		return nil, fmt.Errorf("option key_header %q is not a header name", o.KeyHeader)
	}
	table, err := loadCosts(u.Costs)
	if err != nil {
		return nil, err
	}
	if len(u.Buckets) == 0 {
		return nil, errors.New("the custom provider needs \"buckets\": the limits of every bucket its cost table charges")
	}
	shares, pace, err := u.fairness()
	if err != nil {
		return nil, err
	}
	cfg.Costs, cfg.Base, cfg.Buckets = table, base, map[string]tollgate.Bucket{}
	for name, b := range u.Buckets {
		bucket, err := b.limitsOf(name)
		if err != nil {
			return nil, err
		}
		bucket.Shares, bucket.Pace = shares, pace
		cfg.Buckets[name] = bucket
	}
	if cfg.Limiter, err = quota.New(rdb); err != nil {
		return nil, err
	}
	return tollgate.New(cfg)
}

// validHeaderName reports whether s is a token, as a header's name must be.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}
