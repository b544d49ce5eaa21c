package gateway

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/openai"
)

// openaiOptions are the openai provider's options.
type openaiOptions struct {
	Minute         string  `json:"minute"`
	RPM            int64   `json:"rpm"`
	TPM            int64   `json:"tpm"`
	RPD            int64   `json:"rpd"`
	TPD            int64   `json:"tpd"`
	ReservePercent float64 `json:"reserve_percent"`
	MaxBody        int64   `json:"max_body"`
	// CountUsage settles each request's tokens from the usage its answer
	// tells (openai.Counting.Usage), for servers that count tokens used.
	CountUsage bool `json:"count_usage"`
	// Organization and Project are the OpenAI-Organization and
	// OpenAI-Project every request is sent with, e.g. "org-abc" and
	// "proj_abc"; empty: none (the key's defaults). What a caller sends
	// is never forwarded: it would choose the quota spent.
	Organization string `json:"organization"`
	Project      string `json:"project"`
	// Models are the models served, e.g. ["gpt-4o-mini"]; a request for
	// another is answered 400. Absent: any, up to 64 a day.
	Models []string `json:"models"`
}

func (o *openaiOptions) options() (*openai.Options, error) {
	m, err := duration("minute", o.Minute)
	if err != nil {
		return nil, err
	}
	return &openai.Options{Minute: m, ReservePercent: o.ReservePercent, MaxBody: o.MaxBody, Counting: openai.Counting{Usage: o.CountUsage},
		Limits: openai.Limits{RPM: o.RPM, TPM: o.TPM, RPD: o.RPD, TPD: o.TPD}}, nil
}

func buildOpenAI(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o openaiOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	opts, err := o.options()
	if err != nil {
		return nil, err
	}
	opts.Base, opts.Tollgate = base, cfg
	return openai.NewTransport(rdb, opts)
}
