package gateway

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/gemini"
)

// geminiOptions are the gemini provider's options.
type geminiOptions struct {
	Minute         string  `json:"minute"`
	RPM            int64   `json:"rpm"`
	TPM            int64   `json:"tpm"`
	RPD            int64   `json:"rpd"`
	ReservePercent float64 `json:"reserve_percent"`
	MaxBody        int64   `json:"max_body"`
	// Models are the models served; see openaiOptions.Models.
	Models []string `json:"models"`
}

func buildGemini(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o geminiOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	m, err := duration("minute", o.Minute)
	if err != nil {
		return nil, err
	}
	opts := &gemini.Options{Minute: m, ReservePercent: o.ReservePercent, MaxBody: o.MaxBody,
		Limits: gemini.Limits{RPM: o.RPM, TPM: o.TPM, RPD: o.RPD}}
	opts.Base, opts.Tollgate = base, cfg
	return gemini.NewTransport(rdb, opts)
}
