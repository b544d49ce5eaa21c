// Package gateway is tollgate serve: a reverse proxy that workers in any
// language point their SDKs at instead of the upstream. Each upstream it
// serves is a provider's Transport (providers/youtube, providers/openai,
// ...) built as a Go process would build it, on the same Redis and with
// the default key prefix, so that the gateway's requests and a Go
// process's spend one quota.
//
// The configuration is JSON (Load); Build makes a Gateway of it, an
// http.Handler, and Serve runs one on a listener until its context ends,
// then drains it. docs/gateway.md is the operators' page.
package gateway

import (
	"encoding/json"
	"net/url"
)

// Config is the gateway's configuration file, as Load reads it. Unknown
// fields are errors.
type Config struct {
	// Listen is the address to serve on, e.g. "127.0.0.1:8787"; empty
	// means DefaultListen.
	Listen string `json:"listen"`
	// Redis is the Redis URL (redis://, rediss://, several URLs
	// separated by commas for a cluster, or a Sentinel URL whose query
	// names master_name); empty means $TOLLGATE_REDIS,
	// and when that is empty too, an in-process Redis.
	Redis string `json:"redis"`
	// Callers are the callers and where their tokens are read; none
	// means loopback clients only, without tokens, and only requests
	// whose Host names the gateway and that no web page of another
	// origin sent.
	Callers []Caller `json:"callers"`
	// Upstreams are the upstreams served, each under its URL path prefix.
	Upstreams []Upstream `json:"upstreams"`
	// Limits bound what callers may hold of the gateway; zero values mean
	// the defaults.
	Limits Limits `json:"limits"`
	// ForwardedFor says what X-Forwarded-For the upstream gets: "set"
	// (the client's address alone), "append" (the client's chain, then
	// its address) or "none". Empty means "none" for a third-party target
	// (a host name, or a public address) and "set" for one on localhost,
	// a loopback or a private address.
	ForwardedFor string `json:"forwarded_for"`
	// PublicURL is the URL callers reach the gateway at, e.g.
	// "https://gateway.internal:8443", when it is not the address it
	// listens on (behind TLS termination): a rewritten Location points
	// there. Empty means the address each connection was accepted on;
	// never the Host a request names.
	PublicURL string `json:"public_url"`
}

// DefaultListen is the address served when Config.Listen is empty.
const DefaultListen = "127.0.0.1:8787"

// A Caller is one client of the gateway, named for attribution
// (tollgate.WithCaller) and known by its token.
type Caller struct {
	// Name names the caller in decisions, metrics and logs, e.g.
	// "php-cron".
	Name string `json:"name"`
	// TokenEnv is the environment variable holding its token, read once
	// at start, e.g. "TOLLGATE_TOKEN_PHP".
	TokenEnv string `json:"token_env"`

	token secret // read from TokenEnv by Load
}

// An Upstream is one API the gateway serves.
type Upstream struct {
	// Name names the upstream in answers and logs, e.g. "youtube".
	Name string `json:"name"`
	// Provider is youtube, openai, gemini, github, anthropic, or custom.
	Provider string `json:"provider"`
	// Prefix is the URL path prefix the upstream is served under,
	// starting and ending with "/", e.g. "/youtube/".
	Prefix string `json:"prefix"`
	// Target is the URL the rest of the path is appended to, e.g.
	// "https://youtube.googleapis.com/youtube".
	Target string `json:"target"`
	// KeyEnv is the environment variable holding the upstream's key; empty
	// means each caller's own credential is passed through (allowed only
	// without callers).
	KeyEnv string `json:"key_env"`
	// Options are the provider's options, in snake_case (see
	// docs/gateway.md).
	Options json.RawMessage `json:"options"`
	// Policy is what happens to a request with no room, or while Redis is
	// down; absent means the library's defaults.
	Policy *Policy `json:"policy"`
	// Costs is, for the custom provider, the cost table's file
	// (costs.Load's JSON), relative to the configuration file.
	Costs string `json:"costs"`
	// Buckets are, for the custom provider, the limits of every bucket the
	// table charges.
	Buckets map[string]BucketConfig `json:"buckets"`
	// Shares divides the upstream's days among its callers (each caller
	// a tenant; tollgate.Bucket.Shares): the youtube provider's pool, or
	// every bucket of the custom provider. Absent: off.
	Shares *SharesConfig `json:"shares"`
	// Pace spreads the same days over their length
	// (tollgate.Bucket.Pace). Absent: off.
	Pace *PaceConfig `json:"pace"`

	key    secret   // read from KeyEnv by Load
	target *url.URL // Target, parsed
}
