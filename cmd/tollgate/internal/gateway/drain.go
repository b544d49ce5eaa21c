package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// cutGrace is how long the requests cut at the drain's bound have to be
// answered before their connections close.
const cutGrace = 500 * time.Millisecond

// errShuttingDown is the cause of the requests cancelled on SIGTERM.
var errShuttingDown = errors.New("gateway: shutting down")

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
