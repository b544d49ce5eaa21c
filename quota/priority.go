package quota

import (
	"context"

	"github.com/tollgate/tollgate/internal/quotapath"
)

// A Priority orders the callers that wait: every Interactive caller still
// waiting is served before any Background one, even one that came first;
// within a priority, callers are served in arrival order. A call's
// priority travels in its context (WithPriority); a context without one is
// Interactive. Background calls are usually also given smaller limits (a
// share of each), so that they never spend what interactive calls need.
type Priority int

const (
	// Interactive calls are the default: live traffic, served first.
	Interactive Priority = iota
	// Background calls (backfills, batch jobs) wait behind every
	// interactive call.
	Background
)

// String returns "interactive" or "background".
func (p Priority) String() string {
	if p == Background {
		return "background"
	}
	return "interactive"
}

// WithPriority returns ctx carrying p, for the calls made with it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, quotapath.PriorityKey{}, p)
}

// priorityOf returns the priority ctx carries, Interactive when none.
func priorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(quotapath.PriorityKey{}).(Priority)
	return p
}
