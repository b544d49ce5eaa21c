package tollgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// maxLateHandoffs bounds how often a request is decided again for reaching
// the base transport later than Transit after its admission.
const maxLateHandoffs = 4

// handoff checks an admitted request as it is handed to the base
// transport. Windows are lengthened by Transit and no more: a request
// handed off later than Transit after its admission could reach the
// upstream in one window with the calls admitted a window after it. Such
// a request is decided again, what it holds given back (its units as
// Cancel gives back a call never made), and reported again; one late
// every time fails. A request handed off in time costs a clock read: the
// wall clock's, as Transit is a deadline in real time, the upstream's.
func (t *Transport) handoff(ctx context.Context, r *request) error {
	for late := 0; ; late++ {
		if t.beforeHandoff != nil {
			t.beforeHandoff()
		}
		if r.res == nil || t.limits.transit <= 0 {
			return nil
		}
		after := time.Since(r.at)
		if after <= t.limits.transit {
			return nil
		}
		if err := t.gates.release(ctx, r, heldAll); err != nil {
			t.hooks.log(ctx, slog.LevelWarn, "tollgate: could not give back a request handed off late; its units stay counted",
				slog.String("endpoint", r.endpoint.Name), slog.Any("err", err))
		}
		r.forget()
		if late == maxLateHandoffs {
			err := fmt.Errorf("tollgate: endpoint %q: reached the base transport %v after its admission, later than Transit (%v), %d times",
				r.endpoint.Name, after.Round(time.Millisecond), t.limits.transit, late+1)
			t.hooks.decided(ctx, r, 0, err)
			return err
		}
		t.hooks.log(ctx, slog.LevelWarn, "tollgate: a request reached the base transport later than Transit after its admission; deciding it again",
			slog.String("endpoint", r.endpoint.Name), slog.Duration("after", after), slog.Duration("transit", t.limits.transit))
		if err := t.decide(ctx, r); err != nil {
			return err
		}
	}
}

// send sends an admitted request on its route's base, or the Transport's.
// A request that provably never reached the upstream gets its units back;
// one that fails gives back what it holds.
//
// A reserved request goes out as a copy carrying a trace, to tell whether
// it reached the upstream; a deep copy only when a route rewrites it. A
// request spent from a lease goes as it is: a unit it loses to a failed
// dial only makes the lease end sooner.
func (t *Transport) send(r *request) (*http.Response, error) {
	var trace *sendTrace
	out := r.req
	if r.res != nil {
		trace = new(sendTrace)
		out = r.req.WithContext(trace.attach(r.req.Context()))
	}
	base := t.base
	if r.route != nil {
		if r.route.Rewrite != nil {
			out = r.req.Clone(out.Context())
			r.route.Rewrite(out)
		}
		if r.route.Base != nil {
			base = r.route.Base
		}
	}
	resp, err := base.RoundTrip(out)
	if err != nil {
		ctx := r.req.Context()
		what := heldSlots | heldGates
		if trace != nil && trace.neverSent(err) {
			what |= heldUnits
			t.hooks.spent(r, -1)
		}
		if err := t.gates.release(ctx, r, what); err != nil {
			t.hooks.log(ctx, slog.LevelWarn, "tollgate: could not refund a request that was never sent",
				slog.String("endpoint", r.endpoint.Name), slog.Any("err", err))
		}
	}
	return resp, err
}

// sendTrace watches a request go out, to tell a request that provably never
// reached the upstream (its units may be given back) from one that may have
// (the upstream may have charged it, so its units stay spent).
type sendTrace struct {
	gotConn atomic.Bool
}

// attach returns ctx with the trace added to any the caller set.
func (s *sendTrace) attach(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { s.gotConn.Store(true) },
	})
}

// neverSent reports whether the request failed before any connection to the
// upstream existed: the transport never got a connection, and the error is
// a failed dial or name lookup. Anything else may have reached the upstream.
func (s *sendTrace) neverSent(err error) bool {
	if s.gotConn.Load() {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
