package gateway

import (
	"context"
	"time"

	"github.com/tollgate/tollgate"
)

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
