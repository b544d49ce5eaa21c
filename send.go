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
// a request is decided again, its units given back as Cancel gives back a
// call never made, and reported again; one late every time fails. A
// request handed off in time costs a clock read.
func (t *Transport) handoff(ctx context.Context, c *call, o outcome) (outcome, error) {
	for late := 0; ; late++ {
		if t.beforeHandoff != nil {
			t.beforeHandoff()
		}
		if o.res == nil || t.transit <= 0 {
			return o, nil
		}
		after := time.Since(o.at)
		if after <= t.transit {
			return o, nil
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err := o.res.Cancel(cctx)
		cancel()
		t.releaseSlots(ctx, append(o.slots, o.gates...))
		if err != nil {
			t.log(ctx, slog.LevelWarn, "tollgate: could not give back a request handed off late; its units stay counted",
				slog.String("endpoint", c.endpoint.Name), slog.Any("err", err))
		}
		if late == maxLateHandoffs {
			err = fmt.Errorf("tollgate: endpoint %q: reached the base transport %v after its admission, later than Transit (%v), %d times",
				c.endpoint.Name, after.Round(time.Millisecond), t.transit, late+1)
			t.report(ctx, c, outcome{}, err)
			return outcome{}, err
		}
		t.log(ctx, slog.LevelWarn, "tollgate: a request reached the base transport later than Transit after its admission; deciding it again",
			slog.String("endpoint", c.endpoint.Name), slog.Duration("after", after), slog.Duration("transit", t.transit))
		start := t.now()
		o, err = t.decide(ctx, c)
		o.waited = t.now().Sub(start)
		t.report(ctx, c, o, err)
		if err != nil {
			return o, err
		}
	}
}

// send sends an admitted request on its route's base, or the Transport's.
// A request that provably never reached the upstream gets its units back.
//
// A reserved request goes out as a copy carrying a trace, to tell whether
// it reached the upstream; a deep copy only when a route rewrites it. A
// request spent from a lease goes as it is: a unit it loses to a failed
// dial only makes the lease end sooner.
func (t *Transport) send(c *call, o outcome) (*http.Response, error) {
	var trace *sendTrace
	out := c.req
	if o.res != nil {
		trace = new(sendTrace)
		out = c.req.WithContext(trace.attach(c.req.Context()))
	}
	base := t.base
	if o.route != nil {
		if o.route.Rewrite != nil {
			out = c.req.Clone(out.Context())
			o.route.Rewrite(out)
		}
		if o.route.Base != nil {
			base = o.route.Base
		}
	}
	resp, err := base.RoundTrip(out)
	if err != nil {
		if trace != nil && trace.neverSent(err) {
			t.refund(c, o)
		}
		t.releaseSlots(c.req.Context(), append(o.slots, o.gates...))
	}
	return resp, err
}

// refund gives back the units of a request that never reached the upstream.
func (t *Transport) refund(c *call, o outcome) {
	ctx := c.req.Context()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := o.res.Cancel(cctx); err != nil {
		t.log(ctx, slog.LevelWarn, "tollgate: could not refund a request that was never sent",
			slog.String("endpoint", c.endpoint.Name), slog.Any("err", err))
	}
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
