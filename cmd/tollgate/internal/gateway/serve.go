package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate"
)

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
