package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/spend"
)

// Options are what Build needs besides the configuration.
type Options struct {
	// Redis holds the quotas. Required: the command dials Config.Redis,
	// $TOLLGATE_REDIS, or starts an in-process Redis.
	Redis redis.UniversalClient
	// Log receives the gateway's lines (start, upstream failures); nil
	// discards them. Never a token or a key.
	Log io.Writer
	// Hooks are given to every upstream's Transport: its Trace and
	// Logger. Its other fields must be zero.
	Hooks tollgate.Config
	// Base, when set, sends the requests admitted, instead of a transport
	// of the gateway's own: for tests.
	Base http.RoundTripper
}

// Gateway is the reverse proxy: an http.Handler that routes each request
// by its path's prefix to an upstream's Transport. It is safe for
// concurrent use. Build one with Build; Serve runs it.
type Gateway struct {
	cfg      *Config
	lim      limits
	router   *router
	callers  map[string]string // tokens' hashes: the callers' names
	loopback bool              // no callers: loopback clients only
	inFlight map[string]*atomic.Int64
	rdb      redis.UniversalClient
	proxy    *httputil.ReverseProxy
	ups      []*upstream
	log      *log.Logger
	public   *url.URL // Config.PublicURL, parsed; nil when not set
	budget   *budget  // bytes of request bodies buffered

	mu       sync.Mutex
	flights  map[*flight]struct{}
	draining bool      // SIGTERM came: no new requests
	until    time.Time // the drain's bound, once draining
	cutting  bool      // the drain's bound passed: nothing more is sent
}

// upstream is one configured upstream and its Transport.
type upstream struct {
	cfg       *Upstream
	tr        roundTripCloser
	keyHeader string // where its key goes
	bearer    bool   // as "Authorization: Bearer KEY"
	queryKey  bool   // a passed-through key= goes to keyHeader

	methods       []string // the methods forwarded; others are answered 405
	allow         string   // methods, for Allow
	sessionKey    []byte   // the key of its upload sessions' MACs
	organization  string   // OpenAI-Organization, from the options
	project       string   // OpenAI-Project, from the options
	forwardedFor  string   // set, append or none
	hidesUploadID bool     // upload_id continues a session only with the gateway's MAC
	maxBody       int64    // the largest body its provider reads whole; 0: it reads none
	models        *models  // the models served, of a provider that reads bodies
}

// Build makes the gateway cfg describes: every upstream's Transport, on
// opts.Redis. Close it when done.
func Build(cfg *Config, opts Options) (*Gateway, error) {
	if opts.Redis == nil {
		return nil, errors.New("gateway: Options.Redis is nil")
	}
	lim, err := cfg.Limits.parse()
	if err != nil {
		return nil, err
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	g := &Gateway{cfg: cfg, lim: lim, callers: map[string]string{}, loopback: len(cfg.Callers) == 0,
		inFlight: map[string]*atomic.Int64{"": new(atomic.Int64)}, rdb: opts.Redis,
		log: log.New(logw, "tollgate serve: ", 0), flights: map[*flight]struct{}{},
		budget: &budget{total: lim.maxBuffered, perCaller: lim.maxBufferedPerCaller, caller: map[string]int64{}}}
	for _, c := range cfg.Callers {
		g.callers[tollgate.HashCredential(c.token.get())] = c.Name
		g.inFlight[c.Name] = new(atomic.Int64)
	}
	base := opts.Base
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = lim.upstreamHeader
		t.MaxIdleConnsPerHost = 256
		base = t
	}
	hooks := opts.Hooks
	var routes []route
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		p := providers[u.Provider]
		up := &upstream{cfg: u, keyHeader: p.keyHeader, bearer: p.bearer, queryKey: p.queryKey,
			methods: p.methods, allow: strings.Join(p.methods, ", "), sessionKey: newSessionKey(u.key.get()),
			forwardedFor: cfg.ForwardedFor, hidesUploadID: u.Provider == "youtube"}
		if up.forwardedFor == "" {
			up.forwardedFor = "set"
			if thirdParty(u.target) {
				up.forwardedFor = "none"
			}
		}
		if up.maxBody, up.models, err = bodies(u); err != nil {
			g.Close()
			return nil, fmt.Errorf("gateway: upstream %q: %s", u.Name, err)
		}
		switch u.Provider {
		case "custom":
			var o customOptions
			if err := decodeOptions(u.Options, &o); err == nil && o.KeyHeader != "" {
				up.keyHeader = http.CanonicalHeaderKey(o.KeyHeader)
				up.bearer = up.keyHeader == "Authorization"
			}
		case "openai":
			var o openaiOptions
			if err := decodeOptions(u.Options, &o); err == nil {
				up.organization, up.project = o.Organization, o.Project
			}
		}
		tcfg := hooks
		tcfg.Trace = hooks.Trace.Merge(tollgate.Trace{WaitStarted: g.waitStarted, WaitEnded: g.waitEnded})
		tcfg.Policy = u.tollgatePolicy()
		// Each upstream's Transport writes what it spends under a name of
		// its own (two of one name would overwrite each other's records):
		// the process's, and the upstream's.
		tcfg.Name = cmp.Or(hooks.Name, spend.DefaultProcess()) + "/" + u.Name
		if up.tr, err = p.build(u, opts.Redis, &sender{g: g, base: base}, tcfg); err != nil {
			g.Close()
			return nil, fmt.Errorf("gateway: upstream %q: %s", u.Name, oneLine(err.Error()))
		}
		g.ups = append(g.ups, up)
		routes = append(routes, route{prefix: u.Prefix, target: u.target, up: up})
	}
	g.router = newRouter(routes)
	if cfg.PublicURL != "" {
		g.public, _ = url.Parse(cfg.PublicURL) // checked by Load
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:   g.rewrite,
		Transport: dispatch{},
		// 0: ReverseProxy flushes every write of a response without a
		// length (chunked) or of text/event-stream, so streams pass as
		// they come, and buffers the others' writes.
		FlushInterval:  0,
		ErrorLog:       g.log,
		ModifyResponse: g.relocate,
		ErrorHandler:   g.failed,
	}
	return g, nil
}

// Close closes the upstreams' Transports: their leases end and their
// slots are given back. It does not close Options.Redis.
func (g *Gateway) Close() error {
	var errs []error
	for _, u := range g.ups {
		errs = append(errs, u.tr.Close())
	}
	return errors.Join(errs...)
}

// Describe writes what the gateway serves, one line each: never a token
// or key, only where they are read.
func (g *Gateway) Describe(w io.Writer) {
	for _, u := range g.ups {
		key := "the caller's own credential, passed through"
		if u.cfg.KeyEnv != "" {
			key = "key from $" + u.cfg.KeyEnv
		}
		fmt.Fprintf(w, "tollgate serve: upstream %s (%s): %s -> %s, %s\n", u.cfg.Name, u.cfg.Provider, u.cfg.Prefix, u.cfg.target.Redacted(), key)
	}
	if g.loopback {
		fmt.Fprintln(w, "tollgate serve: no callers configured: serving loopback clients only, without tokens")
		return
	}
	names := make([]string, 0, len(g.cfg.Callers))
	for _, c := range g.cfg.Callers {
		names = append(names, c.Name)
	}
	fmt.Fprintf(w, "tollgate serve: callers: %s\n", strings.Join(names, ", "))
}
