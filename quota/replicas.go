package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability. Redis replicates asynchronously: a master answers a write
// before its replicas have it, so a master that dies can take its last
// milliseconds of decisions with it, and the replica that takes over counts
// less than was admitted. WithReplicas closes that gap with Redis's WAIT,
// which blocks until the replicas acknowledge every write made before it
// on the same connection: each script call that writes is followed, in one
// pipeline on one connection to the node that holds its keys, by a WAIT.
// Decisions sharing a pipeline share its WAIT.
//
// On a cluster the ClusterClient would send a WAIT (a command without keys)
// to any master, where it would wait for nothing: the limiter sends both
// commands through the client of the master of the keys' slot
// (ClusterClient.MasterForKey) instead.

// replicas is what WithReplicas asked for; n == 0: no waiting.
type replicas struct {
	n       int
	timeout time.Duration
	set     bool // WithReplicas was given, n == 0 included
}

// DefaultReplicaTimeout is how long a limiter on a Sentinel failover
// client waits, by default, for a replica to acknowledge each write (see
// WithReplicas). A replica on the same network acknowledges within a
// millisecond or two; the bound is what a decision waits before it fails
// as a Redis failure when no replica does.
const DefaultReplicaTimeout = 250 * time.Millisecond

// WithReplicas makes every write of the limiter wait, before its caller is
// answered, until n replicas of the Redis node that holds it acknowledge it
// (Redis WAIT), for at most timeout. A decision admitted then survives the
// failure of its master, provided a replica that has it takes over. When
// fewer than n acknowledge in time, the call fails with an error matching
// ErrRedis, as if Redis were down (a Transport falls back on its outage
// mode), and units it admitted are given back; Ping fails too while fewer
// than n replicas are connected. Give each master more than n replicas, so
// that after a failover n remain to acknowledge.
//
// On a Sentinel failover client (redis.NewFailoverClient, or
// redis.NewUniversalClient given a MasterName) a limiter waits for one
// replica within DefaultReplicaTimeout unless told otherwise:
// WithReplicas(0, 0) answers each decision as soon as the master has it,
// as on any other client, and a failover may then lose the last ones.
//
// The client must be a *redis.Client (a server, or a Sentinel failover
// client) or a *redis.ClusterClient; timeout must be at least a
// millisecond (WAIT counts whole ones, and 0 would wait forever) and
// shorter than the client's ReadTimeout, which bounds the WAIT's reply.
// Each decision then costs a round trip from its master to a replica more.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(l *Limiter) error {
		if n == 0 {
			l.replicas = replicas{set: true}
			return nil
		}
		r, err := replicasFor(l.client, n, timeout)
		if err != nil {
			return err
		}
		l.replicas = r
		return nil
	}
}

// replicasFor checks what WithReplicas(n, timeout) asks of client.
func replicasFor(client redis.UniversalClient, n int, timeout time.Duration) (replicas, error) {
	what := "replicas " + strconv.Itoa(n) + " within " + timeout.String()
	if n < 1 {
		return replicas{}, invalid(what, "must ask for at least one replica, or 0 for none")
	}
	if timeout < time.Millisecond {
		return replicas{}, invalid(what, "the timeout must be at least 1ms")
	}
	var read time.Duration
	switch c := client.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return replicas{}, invalid(what, fmt.Sprintf("needs a *redis.Client or a *redis.ClusterClient, not a %T", client))
	}
	if read > 0 && timeout >= read {
		return replicas{}, invalid(what, "the timeout must be shorter than the client's ReadTimeout ("+read.String()+")")
	}
	return replicas{n: n, timeout: timeout, set: true}, nil
}

// replicasByDefault gives a limiter on a Sentinel failover client, which
// WithReplicas did not configure, one replica within
// DefaultReplicaTimeout. go-redis names the address of a failover
// client's options "FailoverClient" (its clientOptions), which no real
// address is.
func (l *Limiter) replicasByDefault() error {
	c, ok := l.client.(*redis.Client)
	if l.replicas.set || !ok || c.Options().Addr != "FailoverClient" {
		return nil
	}
	r, err := replicasFor(l.client, 1, DefaultReplicaTimeout)
	if err != nil {
		return fmt.Errorf("%w (a Sentinel client waits for a replica by default: set its ReadTimeout longer, or give WithReplicas)", err)
	}
	l.replicas = r
	return nil
}

// replicaError reports a write that fewer replicas than asked acknowledged
// in time; redisError wraps it, so that it matches ErrRedis.
type replicaError struct {
	acked, want int
	timeout     time.Duration
	ping        bool // counted by Ping: replicas connected, not a write's
}

func (e *replicaError) Error() string {
	if e.ping {
		return fmt.Sprintf("the master has %d replicas connected, and WithReplicas asks %d to acknowledge each decision", e.acked, e.want)
	}
	return fmt.Sprintf("the write reached %d of %d replicas within %v (WithReplicas)", e.acked, e.want, e.timeout)
}

// write runs a script that writes, for a call with nothing to give back
// when the replicas fall short (a record, a pause, a lease, a cancel).
func (l *Limiter) write(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if l.replicas.n == 0 {
		return script.Run(ctx, l.client, keys, args...)
	}
	reply, err := l.durably(ctx, script, keys, args)
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(reply)
	cmd.SetErr(err)
	return cmd
}

// eval runs script alone, and with WithReplicas waits for its write.
func (l *Limiter) eval(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	if l.replicas.n == 0 {
		return script.Run(ctx, l.client, keys, args...).Result()
	}
	return l.durably(ctx, script, keys, args)
}

// unreplicated returns, for a call whose write fell short of its replicas,
// the call as one answered too late for its caller, so that what it
// admitted is given back (see runScript); nil for any other outcome.
func unreplicated(reply any, err error) *decision {
	var re *replicaError
	if reply == nil || !errors.As(err, &re) {
		return nil
	}
	d := &decision{reply: reply, done: make(chan struct{})}
	close(d.done)
	return d
}

// durably runs script on the node holding keys, followed there by WAIT.
func (l *Limiter) durably(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	node, err := l.nodeOf(ctx, keys)
	if err != nil {
		return nil, err
	}
	d := &decision{script: script, keys: keys, args: args}
	l.waitOn(ctx, node, []*decision{d})
	return d.reply, d.err
}

// nodeOf returns the client of the node that holds keys, all in one slot.
func (l *Limiter) nodeOf(ctx context.Context, keys []string) (*redis.Client, error) {
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, keys[0])
	}
	return l.client.(*redis.Client), nil // WithReplicas allows no other
}

// sendDurably runs a batch in one pipeline per node, each ending with a
// WAIT, and hands every decision its answer.
func (l *Limiter) sendDurably(ctx context.Context, batch []*decision) {
	byNode := make(map[*redis.Client][]*decision)
	for _, d := range batch {
		node, err := l.nodeOf(ctx, d.keys)
		if err != nil {
			d.err = err
			close(d.done)
			continue
		}
		byNode[node] = append(byNode[node], d)
	}
	var wg sync.WaitGroup
	for node, ds := range byNode {
		wg.Go(func() {
			l.waitOn(ctx, node, ds)
			for _, d := range ds {
				close(d.done)
			}
		})
	}
	wg.Wait()
}

// waitOn runs the decisions' scripts on node in one pipeline, then WAIT,
// and sets each decision's reply and error. A script the node has lost
// (NOSCRIPT) is sent again whole, in a pipeline of its own with its WAIT.
func (l *Limiter) waitOn(ctx context.Context, node *redis.Client, ds []*decision) {
	acked, err := l.pipelineWait(ctx, node, ds, false)
	var again []*decision
	for _, d := range ds {
		if d.err != nil && redis.HasErrorPrefix(d.err, "NOSCRIPT") {
			again = append(again, d)
		}
	}
	if len(again) > 0 {
		againAcked, againErr := l.pipelineWait(ctx, node, again, true)
		acked, err = min(acked, againAcked), errors.Join(err, againErr)
	}
	for _, d := range ds {
		if d.err != nil {
			continue
		}
		if err != nil {
			d.err = err // the write was made; whether a replica has it is unknown
		} else if acked < l.replicas.n {
			d.err = &replicaError{acked: acked, want: l.replicas.n, timeout: l.replicas.timeout}
		}
	}
}

// pipelineWait sends the decisions' scripts (by hash, or whole) and a WAIT
// in one pipeline, sets each decision's reply and error, and returns how
// many replicas acknowledged, or the WAIT's error.
func (l *Limiter) pipelineWait(ctx context.Context, node *redis.Client, ds []*decision, whole bool) (int, error) {
	pipe := node.Pipeline()
	cmds := make([]*redis.Cmd, len(ds))
	for i, d := range ds {
		if whole {
			cmds[i] = d.script.Eval(ctx, pipe, d.keys, d.args...)
		} else {
			cmds[i] = d.script.EvalSha(ctx, pipe, d.keys, d.args...)
		}
	}
	wait := l.waitCmd(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	stale := false
	for i, d := range ds {
		d.reply, d.err = cmds[i].Result()
		stale = stale || nodeTrouble(d.err)
	}
	n, err := wait.Result()
	if cc, ok := l.client.(*redis.ClusterClient); ok && (stale || nodeTrouble(err)) {
		// The node may have died, or handed its slots on; the cluster
		// client, which did not send these commands, cannot know.
		cc.ReloadState(ctx)
	}
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// nodeTrouble reports an error that says the node may no longer be the
// master of the slot: no answer at all, or a redirection or refusal a
// cluster client would act on.
func nodeTrouble(err error) bool {
	if err == nil || err == redis.Nil {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "MASTERDOWN", "LOADING"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return strings.Contains(re.Error(), "replica")
}

// ping checks that node answers and, with WithReplicas, that it has the
// replicas to acknowledge writes: a WAIT on a connection that has written
// nothing counts the replicas connected, at once.
func (l *Limiter) ping(ctx context.Context, node redis.Cmdable) error {
	if l.replicas.n == 0 {
		return node.Ping(ctx).Err()
	}
	pipe := node.Pipeline()
	ping := pipe.Ping(ctx)
	wait := l.waitCmd(ctx, pipe)
	_, _ = pipe.Exec(ctx)
	if err := ping.Err(); err != nil {
		return err
	}
	n, err := wait.Result()
	if err != nil {
		return err
	}
	if int(n) < l.replicas.n {
		return &replicaError{acked: int(n), want: l.replicas.n, timeout: l.replicas.timeout, ping: true}
	}
	return nil
}

// waitCmd queues WAIT in pipe.
func (l *Limiter) waitCmd(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", l.replicas.n, l.replicas.timeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}
