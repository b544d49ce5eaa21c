package gateway

import (
	"errors"
	"fmt"
	"time"
)

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
