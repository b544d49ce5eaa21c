package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
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

// flight is one request on its way through the gateway.
type flight struct {
	cancel context.CancelCauseFunc
	up     *upstream
	path   string // the outgoing path
	raw    string // escaped, when it differs
	query  string // the outgoing raw query
	keys   []string
	caller string
	hidden string     // upload_ids held back from the Transport, sent as they came
	body   *timedBody // the request's body; nil without one

	// Set under Gateway.mu:
	sent    bool      // handed to the upstream
	drained bool      // cancelled on SIGTERM before it was sent
	turn    time.Time // while it waits for its turn: when the turn comes

	// The upstream's answer of 400 and more, for replaying it when the
	// provider turned it into an error; set and read on the request's
	// goroutine.
	answer *captured
}

type flightKey struct{}

func flightOf(ctx context.Context) *flight {
	f, _ := ctx.Value(flightKey{}).(*flight)
	return f
}

// cutGrace is how long the requests cut at the drain's bound have to be
// answered before their connections close.
const cutGrace = 500 * time.Millisecond

// errShuttingDown is the cause of the requests cancelled on SIGTERM.
var errShuttingDown = errors.New("gateway: shutting down")

// ServeHTTP answers the gateway's own paths, and proxies the others to
// their upstream.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		refuse(w, http.StatusMethodNotAllowed, "bad_request", "tollgate: CONNECT is not served: the gateway is not an open proxy")
		return
	}
	if !strings.HasPrefix(r.RequestURI, "/") || r.URL.IsAbs() || r.URL.Host != "" {
		refuse(w, http.StatusBadRequest, "bad_request", "tollgate: only paths are served, never absolute URIs: the gateway is not an open proxy")
		return
	}
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
		return
	case "/readyz":
		g.ready(w, r)
		return
	}
	if g.loopback {
		if !isLoopback(r.RemoteAddr) {
			early(w, r, http.StatusForbidden, "forbidden", "tollgate: this gateway has no callers configured and serves loopback clients only")
			return
		}
		switch hostOK, originOK := g.sameSite(r); {
		case !hostOK:
			early(w, r, http.StatusMisdirectedRequest, "misdirected", "tollgate: this gateway has no callers configured and answers to its own address only")
			return
		case !originOK:
			early(w, r, http.StatusForbidden, "forbidden", "tollgate: this gateway has no callers configured and refuses requests from web pages of other origins")
			return
		}
	}
	caller, ok := g.caller(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
		early(w, r, http.StatusUnauthorized, "unauthenticated", "tollgate: no valid caller token: send yours as Authorization: Bearer, X-Goog-Api-Key, x-api-key, X-Shopify-Access-Token or key=")
		return
	}
	rt, raw, plain, err := g.router.match(r.URL.EscapedPath())
	switch {
	case errors.Is(err, errNoRoute):
		early(w, r, http.StatusNotFound, "not_found", "tollgate: no upstream is served under this path")
		return
	case err != nil:
		early(w, r, http.StatusBadRequest, "bad_request", "tollgate: "+err.Error())
		return
	}
	if !rt.up.allows(r.Method) {
		w.Header().Set("Allow", rt.up.allow)
		early(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "tollgate: upstream "+strconv.Quote(rt.up.cfg.Name)+" is not sent this method; it is sent "+rt.up.allow)
		return
	}
	scrub(r.Header)
	n := g.inFlight[caller]
	if n.Add(1) > int64(g.lim.maxInFlight) {
		n.Add(-1)
		answer(w, http.StatusTooManyRequests, 1, body{Status: "too_many_requests", Upstream: rt.up.cfg.Name, Cause: "caller_in_flight",
			Message: fmt.Sprintf("tollgate: this caller has %d requests in flight already; retry after 1 second", g.lim.maxInFlight)})
		return
	}
	defer n.Add(-1)

	// Upgrades (WebSocket, h2c) are not proxied.
	r.Header.Del("Upgrade")
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	f := &flight{cancel: cancel, up: rt.up, path: plain, caller: caller}
	if plain != raw {
		f.raw = raw
	}
	if r.ContentLength != 0 {
		f.body = newTimedBody(w, r.Body, g.lim.body)
		r.Body = f.body
		defer f.body.stop()
	}
	f.query, f.keys = withoutKey(r.URL.RawQuery)
	if rt.up.hidesUploadID {
		f.query, f.hidden = rt.up.uploadSession(f.query)
	}
	if !g.enter(f) {
		g.shuttingDown(w, rt.up)
		return
	}
	defer g.leave(f)
	if counted, model := rt.up.counted(r.Method, plain); counted && r.ContentLength != 0 {
		data, held, err := g.budget.buffer(caller, r.Body, r.ContentLength, rt.up.maxBody)
		defer g.budget.give(caller, held)
		if err != nil {
			g.unbuffered(w, r, f, err)
			return
		}
		if model == "" && rt.up.cfg.Provider != "shopify" { // a GraphQL query names no model
			model = modelOf(data)
		}
		if !rt.up.models.admit(caller, model, time.Now()) {
			why := "is not in its option \"models\""
			if rt.up.models.listed == nil {
				why = fmt.Sprintf("would be one more than the %d new models a day a caller may ask for without the option \"models\", which lists them", maxNewModels)
			}
			answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: rt.up.cfg.Name, Cause: "model",
				Message: "tollgate: upstream " + strconv.Quote(rt.up.cfg.Name) + " does not serve this model: it " + why})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
	}
	ctx = context.WithValue(ctx, flightKey{}, f)
	if caller != "" {
		ctx = tollgate.WithCaller(ctx, caller)
	}
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// caller returns the name of the caller whose token the request carries
// ("" without callers); false when it carries none, an unknown one, or
// tokens of several callers.
func (g *Gateway) caller(r *http.Request) (string, bool) {
	if g.loopback {
		return "", true
	}
	var presented []string
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		for _, v := range h {
			tok := bearer(v)
			if tok == "" {
				return "", false // Basic, or no token: not a caller's
			}
			presented = append(presented, tok)
		}
	}
	presented = append(presented, r.Header.Values("X-Goog-Api-Key")...)
	presented = append(presented, r.Header.Values("X-Api-Key")...)              // Anthropic's SDKs
	presented = append(presented, r.Header.Values("X-Shopify-Access-Token")...) // Shopify's clients
	_, keys := withoutKey(r.URL.RawQuery)
	presented = append(presented, keys...)
	name := ""
	for _, tok := range presented {
		n, ok := g.callers[tollgate.HashCredential(strings.TrimSpace(tok))]
		if !ok || (name != "" && n != name) {
			return "", false
		}
		name = n
	}
	return name, name != ""
}

// early answers a request refused before its body is read. When the
// request has a body, the connection is closed after the answer and the
// body is never read: the server would otherwise read up to 256 KiB of
// it, however slowly it comes, before it lets the connection go.
func early(w http.ResponseWriter, r *http.Request, code int, status, message string) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
	refuse(w, code, status, message)
}

// bearer returns the token of an "Authorization: Bearer" value, or "".
func bearer(v string) string {
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// isLoopback reports whether a RemoteAddr is a loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ready answers /readyz: 200 when Redis answers and the gateway is not
// shutting down.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	draining := g.draining
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if draining {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "shutting down\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := g.rdb.Ping(ctx).Err(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "redis does not answer\n")
		return
	}
	io.WriteString(w, "ready\n")
}

// credentialHeaders are the headers an SDK sends its API key in: a caller
// authenticates with one of the first four, and a request forwarded with
// the upstream's key carries none of the caller's (Api-Key, Azure OpenAI's,
// is never a caller's token here, but a token copied into it would reach
// the upstream beside the gateway's key).
var credentialHeaders = []string{"Authorization", "X-Goog-Api-Key", "X-Api-Key", "X-Shopify-Access-Token", "Api-Key"}

// rewrite makes the outgoing request: the target's URL, the caller's
// credentials replaced by the upstream's key, X-Forwarded-For as
// configured. ReverseProxy has removed the hop-by-hop headers.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	f := flightOf(pr.In.Context())
	t := f.up.cfg.target
	pr.Out.URL = &url.URL{Scheme: t.Scheme, Host: t.Host, Path: f.path, RawPath: f.raw, RawQuery: f.query}
	pr.Out.Host = "" // the target's
	h := pr.Out.Header
	for _, k := range organizationHeaders {
		h.Del(k)
	}
	if f.up.organization != "" {
		h.Set("OpenAI-Organization", f.up.organization)
	}
	if f.up.project != "" {
		h.Set("OpenAI-Project", f.up.project)
	}
	if f.up.cfg.key != nil {
		for _, k := range credentialHeaders {
			h.Del(k)
		}
		if f.up.bearer {
			h.Set("Authorization", "Bearer "+f.up.cfg.key.get())
		} else {
			h.Set(f.up.keyHeader, f.up.cfg.key.get())
		}
	} else if len(f.keys) > 0 && f.up.queryKey && h.Get(f.up.keyHeader) == "" {
		// A caller's own key, passed through in a header: never in the URL.
		h.Set(f.up.keyHeader, f.keys[0])
	}
	switch f.up.forwardedFor {
	case "set":
		pr.SetXForwarded()
		h.Del("X-Forwarded-Host")
		h.Del("X-Forwarded-Proto")
	case "append":
		if prior := pr.In.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			h["X-Forwarded-For"] = append([]string(nil), prior...)
		}
		ip, _, err := net.SplitHostPort(pr.In.RemoteAddr)
		if err == nil {
			prior := strings.Join(h.Values("X-Forwarded-For"), ", ")
			if prior != "" {
				ip = prior + ", " + ip
			}
			h.Set("X-Forwarded-For", ip)
		}
	}
}

// relocate points a Location under a configured target (YouTube's
// resumable upload session URI, a redirect) at the gateway, under that
// target's prefix, so that the caller's next requests come through it
// too. Other Locations are left as they are.
func (g *Gateway) relocate(resp *http.Response) error {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil || !u.IsAbs() {
		return nil
	}
	f := flightOf(resp.Request.Context())
	if f == nil {
		return nil
	}
	var best *route
	rest := ""
	for i := range g.router.routes {
		rt := &g.router.routes[i]
		t := rt.target
		if !strings.EqualFold(u.Scheme, t.Scheme) || !strings.EqualFold(u.Host, t.Host) {
			continue
		}
		r, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimRight(t.EscapedPath(), "/")+"/")
		if ok && (best == nil || len(t.EscapedPath()) > len(best.target.EscapedPath())) {
			best, rest = rt, r
		}
	}
	if best == nil || hasDotSegment(u.EscapedPath()) {
		return nil
	}
	q := ""
	if u.RawQuery != "" {
		q = "?" + u.RawQuery
		if best.up.hidesUploadID {
			if id := u.Query().Get("upload_id"); id != "" {
				q += "&" + sessionParam + "=" + best.up.sessionMAC(id)
			}
		}
	}
	resp.Header.Set("Location", g.origin(resp.Request.Context())+best.prefix+rest+q)
	return nil
}

// dispatch sends a request with its upstream's Transport.
type dispatch struct{}

func (dispatch) RoundTrip(req *http.Request) (*http.Response, error) {
	return flightOf(req.Context()).up.tr.RoundTrip(req)
}

// sender is every Transport's base: it marks a request as sent (it then
// finishes on SIGTERM), refuses it once the gateway is shutting down and
// it was not, and keeps the upstream's refusals for replaying.
type sender struct {
	g    *Gateway
	base http.RoundTripper
}

func (s *sender) RoundTrip(req *http.Request) (*http.Response, error) {
	f := flightOf(req.Context())
	if f != nil && !s.g.send(f) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errShuttingDown
	}
	if f != nil && f.hidden != "" {
		req = req.Clone(req.Context())
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += f.hidden
	}
	resp, err := s.base.RoundTrip(req)
	if err == nil && f != nil && resp.StatusCode >= 400 {
		c := &captured{status: resp.StatusCode, header: resp.Header.Clone(), body: resp.Body}
		resp.Body = c
		f.answer = c
	}
	return resp, err
}

// maxCaptured bounds an upstream refusal's body kept for replaying; the
// providers read at most 64 KiB of it.
const maxCaptured = 64 << 10

// captured is an upstream's answer of 400 or more, its body kept as it is
// read.
type captured struct {
	status   int
	header   http.Header
	body     io.ReadCloser
	kept     []byte
	complete bool // read to its end, and kept whole
	over     bool
}

func (c *captured) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	if !c.over {
		if len(c.kept)+n > maxCaptured {
			c.over, c.kept = true, nil
		} else {
			c.kept = append(c.kept, p[:n]...)
		}
	}
	if err == io.EOF && !c.over {
		c.complete = true
	}
	return n, err
}

func (c *captured) Close() error { return c.body.Close() }

// enter records a request, unless the gateway is shutting down.
func (g *Gateway) enter(f *flight) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.flights[f] = struct{}{}
	return true
}

// leave forgets a request.
func (g *Gateway) leave(f *flight) {
	g.mu.Lock()
	delete(g.flights, f)
	g.mu.Unlock()
}

// send marks a request as sent upstream; false once the drain's bound
// passed and it was not.
func (g *Gateway) send(f *flight) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cutting && !f.sent {
		return false
	}
	f.sent = true
	return true
}

// waitStarted notes when a request's turn comes (the Trace's
// WaitStarted); while draining, a request whose turn comes after the
// drain's bound is cancelled at once, and answered 503.
func (g *Gateway) waitStarted(ctx context.Context, d tollgate.Decision) {
	f := flightOf(ctx)
	if f == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f.turn = d.At
	if g.draining && !f.sent && d.At.After(g.until) {
		f.drained = true
		f.cancel(errShuttingDown)
	}
}

// waitEnded notes that a request no longer waits (the Trace's
// WaitEnded).
func (g *Gateway) waitEnded(ctx context.Context, _ tollgate.Decision) {
	if f := flightOf(ctx); f != nil {
		g.mu.Lock()
		f.turn = time.Time{}
		g.mu.Unlock()
	}
}

// drain starts the shutdown, with until its bound: no new request is
// served; a request waiting for a turn that comes after until is
// cancelled, and answered 503; every other request whose headers
// arrived goes on: its body may still be arriving, it may be waiting
// for a turn that comes in time, or in flight upstream.
func (g *Gateway) drain(until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.draining, g.until = true, until
	for f := range g.flights {
		if !f.sent && !f.turn.IsZero() && f.turn.After(until) {
			f.drained = true
			f.cancel(errShuttingDown)
		}
	}
}

// cut ends every request still in flight: the drain's bound passed.
// Those not sent upstream yet are answered 503.
func (g *Gateway) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cutting = true
	for f := range g.flights {
		if !f.sent {
			f.drained = true
		}
		f.cancel(errShuttingDown)
	}
}

// Serve serves on ln until ctx is done, then shuts down: it stops
// accepting connections at once, answers 503 to the requests waiting for
// a turn that comes after the drain bound (Limits.Drain), lets every
// other request whose headers arrived finish (bodies still arriving,
// turns that come in time, answers streaming) for up to that bound,
// then answers 503 to those not yet sent upstream, cuts the others, and
// returns nil. It returns the server's error if serving fails before.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	ln = &perClient{Listener: ln, max: g.lim.maxConns, open: map[string]int{}}
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: g.lim.readHeader,
		IdleTimeout:       g.lim.idle,
		MaxHeaderBytes:    g.lim.maxHeaderBytes,
		ErrorLog:          g.log,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	until := time.Now().Add(g.lim.drain)
	g.drain(until)
	sctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		g.cut()
		// A moment for the requests cut before they were sent to be
		// answered 503, then the connections close.
		gctx, gcancel := context.WithTimeout(context.Background(), cutGrace)
		defer gcancel()
		if srv.Shutdown(gctx) != nil {
			srv.Close()
		}
	}
	<-done
	return nil
}
