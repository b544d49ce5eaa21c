package quota

import (
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// What other packages of tollgate reach of a Limiter without this
// package exporting it: package quota/ops, what only operators call
// (through quota/internal/access); tollgate's request path, the pauses
// only it sets and reads (through internal/quotapath).
func init() {
	access.Of = func(l *Limiter) access.Operator[Limit, Description] {
		return access.Operator[Limit, Description]{
			Client:      l.client,
			Prefix:      l.prefix,
			Survey:      l.survey,
			Activity:    l.activity,
			Series:      l.series,
			Description: l.description,
			Resume:      l.resume,
			Confirm:     l.confirm,
			Tenants:     l.tenants,
		}
	}
	quotapath.PauseUpstream = (*Limiter).pauseUpstream
	quotapath.PauseAmong = (*Limiter).pauseAmong
	quotapath.Store = func(l *Limiter) (redis.UniversalClient, string) { return l.client, l.prefix }
}
