// Package told carries, in a request's context, the quotas an answer told
// where package announce does not read (Shopify's throttleStatus is in the
// answer's body, its call limit in a header of its own): a provider's Base,
// below the tollgate.Transport, reads the answer and tells them; the
// Transport then takes them as it takes the quotas announced in the
// headers, for the buckets that follow them (Bucket.Follows, as
// "dialect/name").
package told

import (
	"context"
	"sync"

	"github.com/tollgate/tollgate/announce"
)

// maxQuotas bounds what one answer tells.
const maxQuotas = 8

// Quotas are what a request's answer told; the zero value holds none.
type Quotas struct {
	mu sync.Mutex
	qs []announce.Quota
}

// key carries a request's *Quotas in its context.
type key struct{}

// With returns ctx carrying an empty *Quotas for its answer to tell.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, &Quotas{})
}

// Tell adds a quota the answer told of a request made with ctx; nothing
// when ctx carries no *Quotas (With), or when it holds maxQuotas already.
func Tell(ctx context.Context, q announce.Quota) {
	t, _ := ctx.Value(key{}).(*Quotas)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.qs) < maxQuotas {
		t.qs = append(t.qs, q)
	}
}

// Of returns the quotas told of a request made with ctx, in the order told.
func Of(ctx context.Context) []announce.Quota {
	t, _ := ctx.Value(key{}).(*Quotas)
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]announce.Quota(nil), t.qs...)
}
