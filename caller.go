package tollgate

import "context"

// callerKey carries the caller's name in a request's context.
type callerKey struct{}

// WithCaller returns a copy of ctx that names the caller a request is
// made for, e.g. "php-cron": the Decision of a request whose context
// carries it says so (Decision.Caller), for the Trace, the metrics and
// the logs. tollgate serve (the gateway) names each caller so; a Go
// program may name its own parts. A name is a label, not a credential:
// never put a token in it.
func WithCaller(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callerKey{}, name)
}

// callerOf returns the caller's name WithCaller put in ctx, or "".
func callerOf(ctx context.Context) string {
	name, _ := ctx.Value(callerKey{}).(string)
	return name
}
