package tollgate

import (
	"context"

	"github.com/tollgate/tollgate/quota"
)

// A Priority orders requests that wait for the same quota. Interactive
// requests (the default) may spend all of each limit, and one still waiting
// is admitted before every background request still waiting, even one that
// came first. Background requests (backfills, batch jobs) may spend only
// Config.BackgroundShare of each limit, wait in arrival order behind every
// interactive request, and are never starved while their share has room.
// With no priority set anywhere, every request is interactive.
type Priority = quota.Priority

// The priorities.
const (
	Interactive = quota.Interactive
	Background  = quota.Background
)

// WithPriority returns ctx carrying p, for the requests sent with it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return quota.WithPriority(ctx, p)
}
