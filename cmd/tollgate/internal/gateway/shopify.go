package gateway

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/shopify"
)

// shopifyOptions are the shopify provider's options.
type shopifyOptions struct {
	// Shop names the shop when the target's host is not its
	// *.myshopify.com (shopify.Options.Shop).
	Shop           string  `json:"shop"`
	Points         int64   `json:"points"`
	Requests       int64   `json:"requests"`
	ReservePercent float64 `json:"reserve_percent"`
	MaxBody        int64   `json:"max_body"`
}

func buildShopify(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o shopifyOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	return shopify.NewTransport(rdb, &shopify.Options{Base: base, Tollgate: cfg, Shop: o.Shop, Points: o.Points,
		Requests: o.Requests, ReservePercent: o.ReservePercent, MaxBody: o.MaxBody})
}
