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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
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

// secret holds a token or a key as a func that returns it: fmt prints a
// func held in a struct as its address, whatever the verb, so a Config
// printed whole shows no secret.
type secret func() string

// newSecret holds s; "" is none (nil).
func newSecret(s string) secret {
	if s == "" {
		return nil
	}
	return func() string { return s }
}

// get returns the secret, or "" for none.
func (s secret) get() string {
	if s == nil {
		return ""
	}
	return s()
}

// A Policy is an upstream's tollgate.Policy in the configuration.
type Policy struct {
	// MaxWait bounds the wait for a turn, e.g. "30s"; empty means
	// tollgate.Policy's default, a minute.
	MaxWait string `json:"max_wait"`
	// OnRefusal is "wait" (the default: wait for the turn up to MaxWait)
	// or "fail" (answer 429 at once).
	OnRefusal string `json:"on_refusal"`
	// OnOutage is "closed" (the default: answer 503 while Redis is down)
	// or "open" (send unmetered).
	OnOutage string `json:"on_outage"`
}

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

// A SharesConfig is an upstream's tollgate.Shares.
type SharesConfig struct {
	// Weights maps a caller to its weight, e.g. {"php-cron": 2};
	// callers not listed weigh 1.
	Weights map[string]float64 `json:"weights"`
	// Lendable is the part, 0..1, of an idle caller's unspent share the
	// others may spend.
	Lendable float64 `json:"lendable"`
	// Idle is how long a caller may go without a request before it is
	// idle, a Go duration, e.g. "10m"; empty means 5 minutes.
	Idle string `json:"idle"`
}

// A PaceConfig is an upstream's tollgate.Pace.
type PaceConfig struct {
	// Burst is the share of a day that may be spent from its start, 0..1.
	Burst float64 `json:"burst"`
}

// fairness returns the upstream's shares and pace, checked; nil when
// absent.
func (u *Upstream) fairness() (*tollgate.Shares, *tollgate.Pace, error) {
	var shares *tollgate.Shares
	var pace *tollgate.Pace
	if s := u.Shares; s != nil {
		idle, err := duration("idle", s.Idle)
		if err != nil {
			return nil, nil, fmt.Errorf("shares: %v", err)
		}
		if !(s.Lendable >= 0 && s.Lendable <= 1) {
			return nil, nil, fmt.Errorf("shares: lendable %v: want 0 to 1", s.Lendable)
		}
		for caller, w := range s.Weights {
			if !(w > 0 && w <= 1e6) {
				return nil, nil, fmt.Errorf("shares: the weight of %q, %v: want a positive number", caller, w)
			}
		}
		shares = &tollgate.Shares{Weights: s.Weights, Lendable: s.Lendable, Idle: idle}
	}
	if p := u.Pace; p != nil {
		if !(p.Burst >= 0 && p.Burst <= 1) {
			return nil, nil, fmt.Errorf("pace: burst %v: want 0 to 1", p.Burst)
		}
		pace = &tollgate.Pace{Burst: p.Burst}
	}
	if (shares != nil || pace != nil) && u.Provider != "youtube" && u.Provider != "custom" {
		return nil, nil, fmt.Errorf("shares and pace are for the youtube and custom providers, not %q", u.Provider)
	}
	return shares, pace, nil
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

// Limits bound the gateway's resources; a zero field means its default.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's headers;
	// default 10s.
	ReadHeaderTimeout string `json:"read_header_timeout"`
	// IdleTimeout closes keep-alive connections idle that long; default
	// 2m.
	IdleTimeout string `json:"idle_timeout"`
	// UpstreamHeaderTimeout bounds the wait for the upstream's response
	// headers once a request is sent; default 5m (a long completion
	// answers only when done).
	UpstreamHeaderTimeout string `json:"upstream_header_timeout"`
	// MaxHeaderBytes bounds a request's headers; default 64 KiB.
	MaxHeaderBytes int `json:"max_header_bytes"`
	// MaxInFlight bounds each caller's requests in flight at once (the
	// loopback clients' together, without callers); default 64.
	MaxInFlight int `json:"max_in_flight"`
	// Drain bounds how long the requests in flight upstream may take to
	// finish after SIGTERM, streams included; default 5s.
	Drain string `json:"drain"`
	// BodyTimeout bounds the wait for each read of a request's body: a
	// body that sends nothing for that long is cut and its connection
	// closed (nginx's client_body_timeout); default 30s.
	BodyTimeout string `json:"body_timeout"`
	// MaxConnsPerClient bounds the connections open at once from one
	// client address; more are closed as they are accepted; default 256.
	MaxConnsPerClient int `json:"max_conns_per_client"`
	// MaxBuffered bounds the bytes of request bodies buffered at once by
	// the whole gateway (the bodies a provider reads whole to count
	// tokens); default 256 MiB. A body that would go past it is answered
	// 503 with Retry-After.
	MaxBuffered int64 `json:"max_buffered"`
	// MaxBufferedPerCaller bounds them for each caller (the loopback
	// clients together, without callers); default 64 MiB. A body that
	// would go past it is answered 429 with Retry-After.
	MaxBufferedPerCaller int64 `json:"max_buffered_per_caller"`
}

// limits are Limits, parsed, defaults filled in.
type limits struct {
	readHeader, idle, upstreamHeader, drain, body time.Duration
	maxHeaderBytes, maxInFlight, maxConns         int
	maxBuffered, maxBufferedPerCaller             int64
}

// Defaults of Limits.
const (
	defaultReadHeaderTimeout     = 10 * time.Second
	defaultIdleTimeout           = 2 * time.Minute
	defaultUpstreamHeaderTimeout = 5 * time.Minute
	defaultMaxHeaderBytes        = 64 << 10
	defaultMaxInFlight           = 64
	defaultDrain                 = 5 * time.Second
	defaultBodyTimeout           = 30 * time.Second
	defaultMaxConnsPerClient     = 256
	defaultMaxBuffered           = 256 << 20
	defaultMaxBufferedPerCaller  = 64 << 20
)

// Load reads a configuration, checks all of it, and reads the tokens and
// keys it names from getenv. dir is where relative paths (Upstream.Costs)
// are found: the configuration file's directory. Every error is one line,
// starting "gateway: ", and names no secret.
func Load(data []byte, dir string, getenv func(string) string) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("gateway: reading the configuration: %s", syntaxAt(data, err))
	}
	if dec.More() {
		return nil, errors.New("gateway: reading the configuration: data after the JSON object")
	}
	if err := cfg.check(dir, getenv); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// check checks the configuration and reads its secrets.
func (c *Config) check(dir string, getenv func(string) string) error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	switch c.ForwardedFor {
	case "", "set", "append", "none":
	default:
		return fmt.Errorf("gateway: forwarded_for %q: want set, append or none", c.ForwardedFor)
	}
	if _, err := c.Limits.parse(); err != nil {
		return err
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("gateway: public_url %q must be an http or https URL with a host, and no user, query or fragment", redactURL(c.PublicURL))
		}
	}
	names := map[string]bool{}
	tokens := map[string]string{} // hash: caller
	for i, cl := range c.Callers {
		switch {
		case cl.Name == "":
			return fmt.Errorf("gateway: callers[%d] has no name", i)
		case names[cl.Name]:
			return fmt.Errorf("gateway: two callers are named %q", cl.Name)
		case cl.TokenEnv == "":
			return fmt.Errorf("gateway: caller %q has no token_env", cl.Name)
		}
		names[cl.Name] = true
		tok := strings.TrimSpace(getenv(cl.TokenEnv))
		if tok == "" {
			return fmt.Errorf("gateway: caller %q: the environment variable %s (token_env) is not set", cl.Name, cl.TokenEnv)
		}
		h := tollgate.HashCredential(tok)
		if other, dup := tokens[h]; dup {
			return fmt.Errorf("gateway: callers %q and %q have the same token", other, cl.Name)
		}
		tokens[h] = cl.Name
		c.Callers[i].token = newSecret(tok)
	}
	if len(c.Upstreams) == 0 {
		return errors.New("gateway: no upstreams")
	}
	ups, prefixes := map[string]bool{}, map[string]string{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Name == "" {
			return fmt.Errorf("gateway: upstreams[%d] has no name", i)
		}
		if ups[u.Name] {
			return fmt.Errorf("gateway: two upstreams are named %q", u.Name)
		}
		ups[u.Name] = true
		if err := u.check(dir, getenv, len(c.Callers) > 0); err != nil {
			return fmt.Errorf("gateway: upstream %q: %v", u.Name, err)
		}
		if other, dup := prefixes[u.Prefix]; dup {
			return fmt.Errorf("gateway: upstreams %q and %q have the same prefix %q", other, u.Name, u.Prefix)
		}
		prefixes[u.Prefix] = u.Name
		if u.key != nil {
			if cl, ok := tokens[tollgate.HashCredential(u.key.get())]; ok {
				return fmt.Errorf("gateway: caller %q's token is upstream %q's key: a caller must never hold the key", cl, u.Name)
			}
		}
	}
	return nil
}

// check checks an upstream and reads its key.
func (u *Upstream) check(dir string, getenv func(string) string, callers bool) error {
	if !strings.HasPrefix(u.Prefix, "/") || !strings.HasSuffix(u.Prefix, "/") {
		return fmt.Errorf("prefix %q must start and end with \"/\"", u.Prefix)
	}
	if err := checkPrefix(u.Prefix); err != nil {
		return err
	}
	t, err := url.Parse(u.Target)
	if err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" || t.User != nil || t.RawQuery != "" || t.Fragment != "" {
		return fmt.Errorf("target %q must be an http or https URL with a host, and no user, query or fragment", redactURL(u.Target))
	}
	u.target = t
	if u.KeyEnv != "" {
		u.key = newSecret(strings.TrimSpace(getenv(u.KeyEnv)))
		if u.key == nil {
			return fmt.Errorf("the environment variable %s (key_env) is not set", u.KeyEnv)
		}
	} else if callers {
		return errors.New("no key_env: an upstream without a key passes each caller's own credential through, which only a gateway without callers (loopback clients only) may do")
	}
	if u.Policy != nil {
		if _, err := u.Policy.policy(); err != nil {
			return err
		}
	}
	if u.Provider != "custom" && (u.Costs != "" || u.Buckets != nil) {
		return fmt.Errorf("costs and buckets are for the custom provider, not %q", u.Provider)
	}
	if _, _, err := u.fairness(); err != nil {
		return err
	}
	if u.Provider == "custom" && u.Costs != "" && !filepath.IsAbs(u.Costs) {
		u.Costs = filepath.Join(dir, u.Costs)
	}
	p, ok := providers[u.Provider]
	if !ok {
		return fmt.Errorf("unknown provider %q (want %s)", u.Provider, strings.Join(providerNames(), ", "))
	}
	// Check the options and build nothing yet: a provider's NewTransport
	// needs a Redis client; Build makes it.
	return p.check(u)
}

// checkPrefix refuses a prefix routing could never match: one with dot
// segments, empty segments inside it, or characters a path escapes.
func checkPrefix(p string) error {
	inner := strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	if inner == "" {
		return nil // "/": every path
	}
	for _, seg := range strings.Split(inner, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q has an empty or dot segment", p)
		}
		if (&url.URL{Path: "/" + seg}).EscapedPath() != "/"+seg {
			return fmt.Errorf("prefix %q has characters a URL path escapes", p)
		}
	}
	return nil
}

// policy returns the tollgate.Policy the configuration gives.
func (p *Policy) policy() (tollgate.Policy, error) {
	var out tollgate.Policy
	if p.MaxWait != "" {
		d, err := time.ParseDuration(p.MaxWait)
		if err != nil || d <= 0 {
			return out, fmt.Errorf("policy max_wait %q: want a positive Go duration, e.g. \"30s\"", p.MaxWait)
		}
		out.MaxWait = d
	}
	switch p.OnRefusal {
	case "", "wait":
	case "fail":
		out.OnRefusal = tollgate.Refuse
	default:
		return out, fmt.Errorf("policy on_refusal %q: want wait or fail", p.OnRefusal)
	}
	switch p.OnOutage {
	case "", "closed":
	case "open":
		out.OnOutage = tollgate.FailOpen
	default:
		return out, fmt.Errorf("policy on_outage %q: want closed or open", p.OnOutage)
	}
	return out, nil
}

// tollgatePolicy returns the upstream's Config.Policy; nil for the defaults.
func (u *Upstream) tollgatePolicy() func(costs.Endpoint) tollgate.Policy {
	if u.Policy == nil {
		return nil
	}
	p, _ := u.Policy.policy() // checked by Load
	return tollgate.Policies(p, nil)
}

// parse returns the limits, defaults filled in.
func (l Limits) parse() (limits, error) {
	out := limits{readHeader: defaultReadHeaderTimeout, idle: defaultIdleTimeout,
		upstreamHeader: defaultUpstreamHeaderTimeout, drain: defaultDrain, body: defaultBodyTimeout,
		maxHeaderBytes: defaultMaxHeaderBytes, maxInFlight: defaultMaxInFlight, maxConns: defaultMaxConnsPerClient,
		maxBuffered: defaultMaxBuffered, maxBufferedPerCaller: defaultMaxBufferedPerCaller}
	for _, d := range []struct {
		name, v string
		to      *time.Duration
	}{
		{"read_header_timeout", l.ReadHeaderTimeout, &out.readHeader},
		{"idle_timeout", l.IdleTimeout, &out.idle},
		{"upstream_header_timeout", l.UpstreamHeaderTimeout, &out.upstreamHeader},
		{"drain", l.Drain, &out.drain},
		{"body_timeout", l.BodyTimeout, &out.body},
	} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return out, fmt.Errorf("gateway: limits %s %q: want a positive Go duration", d.name, d.v)
		}
		*d.to = v
	}
	if l.MaxHeaderBytes < 0 || l.MaxInFlight < 0 || l.MaxConnsPerClient < 0 {
		return out, errors.New("gateway: limits max_header_bytes, max_in_flight and max_conns_per_client must not be negative")
	}
	if l.MaxBuffered < 0 || l.MaxBufferedPerCaller < 0 {
		return out, errors.New("gateway: limits max_buffered and max_buffered_per_caller must not be negative")
	}
	if l.MaxBuffered > 0 {
		out.maxBuffered = l.MaxBuffered
	}
	if l.MaxBufferedPerCaller > 0 {
		out.maxBufferedPerCaller = l.MaxBufferedPerCaller
	}
	if l.MaxConnsPerClient > 0 {
		out.maxConns = l.MaxConnsPerClient
	}
	if l.MaxHeaderBytes > 0 {
		out.maxHeaderBytes = l.MaxHeaderBytes
	}
	if l.MaxInFlight > 0 {
		out.maxInFlight = l.MaxInFlight
	}
	return out, nil
}

// syntaxAt says what is wrong with a configuration that is not JSON, or
// not of its shape, and where: the line and column of the offending byte,
// or of the end of a document cut short; for a value of the wrong type,
// its line.
func syntaxAt(data []byte, err error) string {
	offset, lineOnly := int64(-1), false
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.As(err, &typ):
		offset, lineOnly = typ.Offset, true // the offset is the value's end
	case errors.Is(err, io.ErrUnexpectedEOF):
		offset = int64(len(data))
		err = errors.New("the JSON ends before it is complete")
	}
	if offset < 0 || offset > int64(len(data)) {
		return oneLine(err.Error())
	}
	line, col := 1, 1
	for _, b := range data[:offset] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	if lineOnly {
		return fmt.Sprintf("line %d: %s", line, oneLine(err.Error()))
	}
	return fmt.Sprintf("line %d, column %d: %s", line, col, oneLine(err.Error()))
}

// positiveOptions are the options that, when given, must be positive: a
// quota, a window or a reserve of 0 would otherwise silently mean the
// provider's default (a "quota": 0 meant 10,000).
var positiveOptions = map[string]bool{
	"quota": true, "search_quota": true, "upload_quota": true, "batch_stats_quota": true,
	"rpm": true, "tpm": true, "rpd": true, "tpd": true, "itpm": true, "otpm": true,
	"window": true, "minute": true, "hour": true,
}

// reserveOptions are the reserves: 0 would silently mean the provider's
// default (5%), so it is refused; a negative reserve_percent means none,
// as the providers' Options say.
var reserveOptions = map[string]bool{"reserve_percent": true, "reserve_units": true}

// checkPositive refuses a quota or window option of zero or less (an
// empty window too), and a reserve of zero (and negative units), naming
// it; classes' limits are named with their class, e.g.
// classes.claude-haiku-4.rpm.
func checkPositive(prefix string, raw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil // not an object: decoding says so
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := bytes.TrimSpace(fields[name])
		if name == "classes" {
			var classes map[string]json.RawMessage
			if json.Unmarshal(v, &classes) == nil {
				for _, c := range slices.Sorted(maps.Keys(classes)) {
					if err := checkPositive(prefix+"classes."+c+".", classes[c]); err != nil {
						return err
					}
				}
			}
			continue
		}
		var n float64
		var d string
		isNumber := json.Unmarshal(v, &n) == nil
		switch {
		case reserveOptions[name] && isNumber && n == 0:
			return fmt.Errorf("option %s%s 0: leave it out for the default (5%%), or give reserve_percent -1 for no reserve", prefix, name)
		case reserveOptions[name] && name == "reserve_units" && isNumber && n < 0:
			return fmt.Errorf("option %s%s %s: must be positive (leave it out for the default)", prefix, name, v)
		case !positiveOptions[name]:
			continue
		case isNumber && n <= 0:
			return fmt.Errorf("option %s%s %s: must be positive (leave it out for the default)", prefix, name, v)
		case json.Unmarshal(v, &d) == nil && d == "":
			return fmt.Errorf("option %s%s \"\": want a positive Go duration, e.g. \"10s\" (leave it out for the default)", prefix, name)
		}
	}
	return nil
}

// decodeOptions decodes an upstream's options into v; unknown options are
// errors, and so is a quota or window of zero or less, or a reserve of 0.
func decodeOptions(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if err := checkPositive("", raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		// encoding/json says "json: unknown field \"x\"".
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("unknown option %s", f)
		}
		return fmt.Errorf("options: %s", oneLine(msg))
	}
	return nil
}

// duration reads an option's Go duration; "" is 0.
func duration(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("option %s %q: want a positive Go duration, e.g. \"10s\"", name, v)
	}
	return d, nil
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

// providerNames lists the providers, sorted.
func providerNames() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// redactURL hides a URL's password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(s, "@") {
		return "(a URL with a user)"
	}
	return strconv.Quote(s)[1 : len(strconv.Quote(s))-1]
}
