package quota

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Ping checks that the Redis node holding scope's keys answers: on a
// cluster, the master of the scope's slot; otherwise the server. On a
// cluster it first asks the client to reload its slot map (in the
// background), so that after a failover a later Ping finds the replica that
// took over: go-redis otherwise keeps a dead master's slots until its
// ClusterStateReloadInterval passes.
func (l *Limiter) Ping(ctx context.Context, scope string) error {
	if err := l.check(scope); err != nil {
		return err
	}
	var err error
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
		var node *redis.Client
		if node, err = cc.MasterForKey(ctx, l.scopeKey(scope)); err == nil {
			err = l.ping(ctx, node)
		}
	} else {
		err = l.ping(ctx, l.client)
	}
	if err != nil {
		return redisError(ctx, "ping", err)
	}
	return nil
}
