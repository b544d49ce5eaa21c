package gateway

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/github"
)

// githubOptions are the github provider's options.
type githubOptions struct {
	Minute         string  `json:"minute"`
	Hour           string  `json:"hour"`
	ReservePercent float64 `json:"reserve_percent"`
	ReserveUnits   int64   `json:"reserve_units"`
}

func buildGitHub(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o githubOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	m, err := duration("minute", o.Minute)
	if err != nil {
		return nil, err
	}
	h, err := duration("hour", o.Hour)
	if err != nil {
		return nil, err
	}
	opts := &github.Options{Minute: m, Hour: h, ReservePercent: o.ReservePercent, ReserveUnits: o.ReserveUnits}
	opts.Base, opts.Tollgate = base, cfg
	return github.NewTransport(rdb, opts)
}
