package tollgate

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"sync/atomic"
)

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
