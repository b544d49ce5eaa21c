package gateway

import (
	"maps"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/anthropic"
)

// anthropicLimits are one model class's limits per minute
// (anthropic.Limits); absent: learned from the headers.
type anthropicLimits struct {
	RPM  int64 `json:"rpm"`
	ITPM int64 `json:"itpm"`
	OTPM int64 `json:"otpm"`
}

// anthropicOptions are the anthropic provider's options.
type anthropicOptions struct {
	Minute string `json:"minute"`
	anthropicLimits
	// Classes gives some model classes' limits (anthropic.Options.Classes),
	// e.g. {"claude-haiku-4": {"rpm": 50, "itpm": 50000, "otpm": 10000}}.
	Classes map[string]anthropicLimits `json:"classes"`
	// CacheReads marks, by class, whether cache reads count toward ITPM,
	// over anthropic.DefaultCacheReads, e.g. {"claude-3-5-haiku": false}.
	CacheReads      map[string]bool `json:"cache_reads"`
	ReservePercent  float64         `json:"reserve_percent"`
	MaxBody         int64           `json:"max_body"`
	BytesPerToken   int64           `json:"bytes_per_token"`
	ToolTokens      int64           `json:"tool_tokens"`
	InlineTokens    int64           `json:"inline_tokens"`
	ReferenceTokens int64           `json:"reference_tokens"`
	// Models are the models served; see openaiOptions.Models.
	Models []string `json:"models"`
}

func (o *anthropicOptions) options() (*anthropic.Options, error) {
	m, err := duration("minute", o.Minute)
	if err != nil {
		return nil, err
	}
	opts := &anthropic.Options{Minute: m, ReservePercent: o.ReservePercent, MaxBody: o.MaxBody,
		Limits: anthropic.Limits(o.anthropicLimits),
		Counting: anthropic.Counting{BytesPerToken: o.BytesPerToken, ToolTokens: o.ToolTokens,
			InlineTokens: o.InlineTokens, ReferenceTokens: o.ReferenceTokens}}
	for c, l := range o.Classes {
		if opts.Classes == nil {
			opts.Classes = map[string]anthropic.Limits{}
		}
		opts.Classes[c] = anthropic.Limits(l)
	}
	if len(o.CacheReads) > 0 {
		marks := maps.Clone(o.CacheReads)
		opts.CacheReads = func(class string) bool {
			if counts, ok := marks[class]; ok {
				return counts
			}
			return anthropic.DefaultCacheReads(class)
		}
	}
	return opts, nil
}

func buildAnthropic(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error) {
	var o anthropicOptions
	if err := decodeOptions(u.Options, &o); err != nil {
		return nil, err
	}
	opts, err := o.options()
	if err != nil {
		return nil, err
	}
	opts.Base, opts.Tollgate = base, cfg
	return anthropic.NewTransport(rdb, opts)
}
