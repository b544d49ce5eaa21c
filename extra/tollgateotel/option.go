package tollgateotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// An Option changes how New records.
type Option func(*config)

type config struct {
	provider metric.MeterProvider
	scopes   bool
}

func newConfig(opts []Option) config {
	c := config{provider: otel.GetMeterProvider()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMeterProvider records with mp instead of the global MeterProvider
// (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.provider = mp
		}
	}
}

// WithScopes adds the attribute tollgate.scope, the scope's name as the
// Transport gives it (a name you chose, or the hash CredentialScope makes
// of a credential, never the credential), to every metric about a scope.
// Off by default: a Transport scoped by credential has as many scopes as
// keys or users, and each is a series of every such metric.
func WithScopes() Option {
	return func(c *config) { c.scopes = true }
}
