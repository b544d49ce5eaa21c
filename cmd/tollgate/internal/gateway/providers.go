package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/github"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/providers/shopify"
	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
)

// A provider builds an upstream's Transport and says where the upstream's
// key goes.
type provider struct {
	// build decodes the upstream's options and returns its Transport,
	// sending through base, with the hooks in cfg (tollgate.Config's
	// Trace and Logger). check calls it to check the options.
	build func(u *Upstream, rdb redis.UniversalClient, base http.RoundTripper, cfg tollgate.Config) (roundTripCloser, error)
	// keyHeader is the header the upstream's key is sent in; bearer says
	// "Authorization: Bearer KEY".
	keyHeader string
	bearer    bool
	// queryKey says that a passed-through key= goes to keyHeader, never
	// in the URL.
	queryKey bool
	// methods are the methods the provider's API uses: the only ones
	// forwarded.
	methods []string
}

// roundTripCloser is a provider's Transport.
type roundTripCloser interface {
	http.RoundTripper
	io.Closer
}

// providers are the providers by name.
var providers = map[string]provider{
	"youtube": {build: buildYouTube, keyHeader: "X-Goog-Api-Key", queryKey: true, methods: methodsYouTube},
	"openai":  {build: buildOpenAI, keyHeader: "Authorization", bearer: true, methods: methodsOpenAI},
	"gemini":  {build: buildGemini, keyHeader: "X-Goog-Api-Key", queryKey: true, methods: methodsGemini},
	"github":  {build: buildGitHub, keyHeader: "Authorization", bearer: true, methods: methodsREST},
	"custom":  {build: buildCustom, keyHeader: "Authorization", bearer: true, methods: methodsREST},
	// Anthropic's key goes in x-api-key; anthropic-version passes as the
	// caller sent it.
	"anthropic": {build: buildAnthropic, keyHeader: "X-Api-Key", methods: methodsAnthropic},
	// Shopify's access token goes in X-Shopify-Access-Token.
	"shopify": {build: buildShopify, keyHeader: "X-Shopify-Access-Token", methods: methodsREST},
}

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

// bodyOptions are the options of the providers that read a body whole to
// count it: how large it may be, and the models served.
type bodyOptions struct {
	MaxBody int64    `json:"max_body"`
	Models  []string `json:"models"`
}

// bodies returns an upstream's max_body (0 for a provider that counts no
// body) and the models it serves.
func bodies(u *Upstream) (int64, *models, error) {
	var def int64
	switch u.Provider {
	case "openai":
		def = openai.DefaultMaxBody
	case "anthropic":
		def = anthropic.DefaultMaxBody
	case "gemini":
		def = gemini.DefaultMaxBody
	case "shopify":
		def = shopify.DefaultMaxBody
	default:
		return 0, nil, nil
	}
	var o bodyOptions
	if len(bytes.TrimSpace(u.Options)) > 0 {
		// The provider's own decoding refuses unknown options.
		if err := json.Unmarshal(u.Options, &o); err != nil {
			return 0, nil, fmt.Errorf("options: %s", oneLine(err.Error()))
		}
	}
	m := &models{}
	if o.Models != nil {
		m.listed = []string{}
		for _, name := range o.Models {
			if strings.TrimSpace(name) == "" {
				return 0, nil, errors.New("option models has an empty name")
			}
			m.listed = append(m.listed, name)
		}
	}
	if o.MaxBody > 0 {
		def = o.MaxBody
	}
	return def, m, nil
}

// check decodes and checks the upstream's options: it builds the
// Transport on a client of no server, to have its constructor check the
// rest, and closes it. Nothing dials: the constructors do not contact
// Redis.
func (p provider) check(u *Upstream) error {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c, err := p.build(u, rdb, nil, tollgate.Config{})
	if err != nil {
		return errors.New(oneLine(err.Error()))
	}
	if _, _, err := bodies(u); err != nil {
		c.Close()
		return err
	}
	return c.Close()
}
