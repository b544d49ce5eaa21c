package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// Kit is what every provider's Transport is built on: the limiter on the
// Redis client it was given (or on an in-process Redis it started), the
// tollgate.Transports it built there, and the methods a provider's
// Transport shows its users beside RoundTrip (Recording). A provider keeps
// only what is its own: its cost table, its scope, its counting and its
// reading of answers.
//
// Start it with Start; it is safe for concurrent use once the provider's
// NewTransport has returned.
type Kit struct {
	Recording        // Usage, Record, Pause, CloseIdleConnections, Close
	name      string // the provider's package name, which starts every error
	owned     io.Closer
	built     []*tollgate.Transport
	// pick returns the Transport that decides a scope's requests; nil
	// means the first built.
	pick func(scope string) (*tollgate.Transport, error)
	// Limiter is the limiter every Transport of the kit decides with.
	Limiter *quota.Limiter
}

// Start returns a Kit for the provider named name (its package name) on
// rdb, or on an in-process Redis it starts when rdb is nil, with a limiter
// built with opts.
func Start(name string, rdb redis.UniversalClient, opts ...quota.Option) (*Kit, error) {
	k := &Kit{name: name}
	k.Recording = Recording{Controls{k}}
	if rdb == nil {
		local, err := embedded.New()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rdb, k.owned = local, local
	}
	lim, err := quota.New(rdb, opts...)
	if err != nil {
		return nil, k.Fail(err)
	}
	k.Limiter = lim
	return k, nil
}

// New builds a tollgate.Transport on the kit's limiter (cfg.Limiter is
// set to it), keeping it to be closed with the kit. Its errors are
// prefixed with the provider's name.
func (k *Kit) New(cfg tollgate.Config) (*tollgate.Transport, error) {
	cfg.Limiter = k.Limiter
	tr, err := tollgate.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.name, err)
	}
	k.built = append(k.built, tr)
	return tr, nil
}

// Pick sets how the kit finds the Transport that decides a scope's
// requests, for Usage, Record and Pause; without it, the first built does.
func (k *Kit) Pick(pick func(scope string) (*tollgate.Transport, error)) { k.pick = pick }

// Fail closes what the kit started, and returns err prefixed with the
// provider's name unless it already is.
func (k *Kit) Fail(err error) error {
	k.Close()
	if !strings.HasPrefix(err.Error(), k.name+": ") {
		err = fmt.Errorf("%s: %w", k.name, err)
	}
	return err
}

// forScope returns the Transport that decides a scope's requests.
func (k *Kit) forScope(scope string) (*tollgate.Transport, error) {
	if k.pick != nil {
		return k.pick(scope)
	}
	if len(k.built) == 0 {
		return nil, fmt.Errorf("%s: the Transport is not built", k.name)
	}
	return k.built[0], nil
}

// Controls are the methods a provider's Transport shows its users beside
// RoundTrip, handed on to the kit: Usage and Pause, as the
// tollgate.Transport deciding the scope (Pick) has them, and
// CloseIdleConnections and Close. A provider's Transport embeds them
// under an unexported alias of its own (type controls = provider.Controls),
// so that they are its methods and no field shows; its doc comment says
// which buckets and scopes they take.
type Controls struct{ kit *Kit }

// Recording is Controls with Record, for the providers whose users count
// what a scope spent without tollgate.
type Recording struct{ Controls }

// Usage reads how much of each limit of bucket is spent in scope, as
// tollgate.Transport.Usage does.
func (c Controls) Usage(ctx context.Context, scope, bucket string) ([]quota.Usage, error) {
	tr, err := c.kit.forScope(scope)
	if err != nil {
		return nil, err
	}
	return tr.Usage(ctx, scope, bucket)
}

// Record counts units of bucket spent in scope outside tollgate, as
// tollgate.Transport.Record does.
func (r Recording) Record(ctx context.Context, scope, bucket string, units int64) error {
	tr, err := r.kit.forScope(scope)
	if err != nil {
		return err
	}
	return tr.Record(ctx, scope, bucket, units)
}

// Pause stops bucket ("" for all) in scope for every process, for d, as
// tollgate.Transport.Pause does.
func (c Controls) Pause(ctx context.Context, scope, bucket string, d time.Duration) error {
	tr, err := c.kit.forScope(scope)
	if err != nil {
		return err
	}
	return tr.Pause(ctx, scope, bucket, d)
}

// CloseIdleConnections closes the idle connections of the Base the kit's
// first Transport sends with, when it can; http.Client's
// CloseIdleConnections calls it.
func (c Controls) CloseIdleConnections() {
	if len(c.kit.built) > 0 {
		c.kit.built[0].CloseIdleConnections()
	}
}

// Close releases every Transport the kit built, and the in-process Redis
// if NewTransport started one for want of a Redis client.
func (c Controls) Close() error { return c.kit.Close() }

// Close releases every Transport the kit built, and the in-process Redis
// if Start started one.
func (k *Kit) Close() error {
	var errs []error
	for _, tr := range k.built {
		errs = append(errs, tr.Close())
	}
	if k.owned != nil {
		errs = append(errs, k.owned.Close())
	}
	return errors.Join(errs...)
}

// Replay returns a copy of req with ctx whose body is body, which can be
// read again (GetBody), for a request whose body a provider read to count
// it.
func Replay(ctx context.Context, req *http.Request, body []byte) *http.Request {
	out := req.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out
}

// PoolOf returns the pool a user's ScopeFunc names for req, or an error
// (prefixed with the provider's name, and with req's body closed) when it
// fails or names one that is empty or contains "/".
func PoolOf(name string, scope tollgate.ScopeFunc, req *http.Request) (string, error) {
	pool, err := scope(req)
	if err != nil || pool == "" || strings.Contains(pool, "/") {
		CloseBody(req)
		return "", fmt.Errorf("%s: the scope func named the pool %q (%v): it must be a name without \"/\"", name, pool, err)
	}
	return pool, nil
}

// scopeKey carries a request's scope in its context, from a provider's
// RoundTrip to its Transports' ScopeFunc.
type scopeKey struct{}

// WithScope returns req (or a shallow copy) with scope in its context,
// for ScopeOf to read.
func WithScope(req *http.Request, scope string) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), scopeKey{}, scope))
}

// ScopeOf is the ScopeFunc of a provider that names the scope itself in
// RoundTrip (WithScope): it returns the scope named there.
func ScopeOf(req *http.Request) (string, error) {
	if s, ok := req.Context().Value(scopeKey{}).(string); ok {
		return s, nil
	}
	return "", errors.New("the request did not come through the provider's RoundTrip")
}
