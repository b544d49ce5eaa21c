package quota

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Decisions from concurrent callers share round trips. A decision costs
// Redis a few microseconds of script, and as much again of reading a
// request and writing a reply; sent together in one pipeline, many
// decisions share one read and one write on each side. A caller that finds
// fewer than the limiter's pipelines in flight sends at once, with whatever
// else is waiting: a lone caller never waits for company. Only when every
// pipeline is in flight do decisions queue, to leave together in the next.
// Redis still runs each decision's script on its own, in arrival order:
// a decision remains one EVALSHA that reads and writes atomically, and a
// pipeline only carries several such decisions in one write, never one
// decision's read and write apart.
//
// A caller's context bounds its wait either way. A decision that leaves the
// queue unsent was never made; one already sent is made, and the units it
// admits are given back when its answer arrives.

// defaultPipelines is how many pipelines of decisions a limiter keeps in
// flight at most, unless WithPipelines says otherwise.
const defaultPipelines = 4

// maxBatch bounds the decisions in one pipeline, so that one reply does not
// grow without bound.
const maxBatch = 128

// WithPipelines sets how many pipelines of decisions may be in flight at
// once (4 unless set); decisions that arrive while all are in flight leave
// together in the next. 0 sends every decision in a round trip of its own.
func WithPipelines(n int) Option {
	return func(l *Limiter) error {
		if n < 0 {
			return invalid("pipelines "+strconv.Itoa(n), "must be at least zero")
		}
		l.batch.pipelines = n
		return nil
	}
}

// decision is one script call (a decision, most often; a settlement, a
// slot taken or released), on its way through a batch when it has to
// queue.
type decision struct {
	script *redis.Script
	keys   []string
	args   []any
	seq    uint64 // names its entries (Limiter.entryID); set while building
	reply  any
	err    error
	sent   bool          // taken into a pipeline; guarded by batcher.mu
	done   chan struct{} // closed when reply and err are set
}

// batcher queues decisions while every pipeline is in flight.
type batcher struct {
	pipelines int // the most in flight; 0: no batching

	mu       sync.Mutex
	inFlight int
	queue    []*decision
}

// runScript runs script for keys and args, in a pipeline with the calls of
// concurrent callers when batching is on. When ctx ends first, a call
// still queued leaves the queue unsent; one already on its way is returned
// as late, for the caller to undo once it is answered.
func (l *Limiter) runScript(ctx context.Context, script *redis.Script, keys []string, args []any) (reply any, late *decision, err error) {
	script = leanFor(script, args)
	b := &l.batch
	if b.pipelines == 0 {
		reply, err = l.eval(ctx, script, keys, args)
		return reply, unreplicated(reply, err), err
	}
	b.mu.Lock()
	if b.inFlight < b.pipelines {
		// A pipeline is free, so nothing is queued (a finished pipeline
		// takes the queue with it): send alone, bounded by the caller's own
		// context as it would be without batching.
		b.inFlight++
		b.mu.Unlock()
		reply, err = l.eval(ctx, script, keys, args)
		l.sendQueued(ctx)
		return reply, unreplicated(reply, err), err
	}
	d := &decision{script: script, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, d)
	b.mu.Unlock()

	select {
	case <-d.done:
		return d.reply, unreplicated(d.reply, d.err), d.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d.sent {
		return nil, d, ctx.Err()
	}
	if i := slices.Index(b.queue, d); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	return nil, nil, ctx.Err()
}

// take removes up to maxBatch decisions from the queue, marking them sent.
// The caller holds b.mu.
func (b *batcher) take() []*decision {
	n := min(len(b.queue), maxBatch)
	batch := make([]*decision, n)
	copy(batch, b.queue)
	for _, d := range batch {
		d.sent = true
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// send runs batches in one pipeline each, hands every decision its answer,
// and goes on with the decisions that queued meanwhile, until none wait.
// It runs on a goroutine of its own, so that each caller waits for its own
// answer or its own context, whichever comes first.
func (l *Limiter) send(ctx context.Context, batch []*decision) {
	// The batch carries many callers' decisions: the one whose context it
	// borrows must not cut the others short. The client's timeouts bound it.
	ctx = context.WithoutCancel(ctx)
	for batch != nil {
		if l.replicas.n > 0 {
			l.sendDurably(ctx, batch)
			batch = l.batch.next()
			continue
		}
		pipe := l.client.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, d := range batch {
			cmds[i] = d.script.EvalSha(ctx, pipe, d.keys, d.args...)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		for i, d := range batch {
			d.reply, d.err = cmds[i].Result()
			if d.err != nil && redis.HasErrorPrefix(d.err, "NOSCRIPT") {
				// The script cache was emptied (a restart, a failover, SCRIPT
				// FLUSH): Run sends the source, which loads it again.
				d.reply, d.err = d.script.Run(ctx, l.client, d.keys, d.args...).Result()
			}
			close(d.done)
		}
		batch = l.batch.next()
	}
}

// sendQueued sends what queued while a lone decision was in flight, or
// frees its pipeline when nothing did.
func (l *Limiter) sendQueued(ctx context.Context) {
	if batch := l.batch.next(); batch != nil {
		go l.send(ctx, batch)
	}
}

// next takes the next batch for a pipeline that has finished, or frees the
// pipeline and returns nil when nothing waits.
func (b *batcher) next() []*decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inFlight--
		return nil
	}
	return b.take()
}

// run runs script like runScript, for a call with nothing to undo should
// the caller give up while it is on its way (a settlement, a slot given
// back): its answer is then dropped.
func (l *Limiter) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	reply, _, err := l.runScript(ctx, script, keys, args)
	return reply, err
}
