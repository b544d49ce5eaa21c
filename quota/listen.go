package quota

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Notice is a pause or a resume told by a process (PauseBecause,
// ops.Operator.Resume), as a Listener receives it; or word that the listener
// subscribed again after a lost connection.
type Notice struct {
	// ID names the notice, e.g. "k3x9a.5f".
	ID string
	// Resume reports a resume; otherwise the notice is a pause.
	Resume bool
	// Left is how long the pause in force had left when told, e.g. 30m;
	// zero for a resume.
	Left time.Duration
	// Subscribed reports no notice but a new subscription, after a lost
	// connection: notices told meanwhile were missed, so whatever they
	// would have changed must be read from Redis again.
	Subscribed bool
	// Confirmed reports no new notice but word, from the tool that told
	// the resume named ID (ops.Operator.Confirm), that every process
	// listening has applied it, or that the tool stopped waiting for
	// them: what the resume made each process give back is given back
	// everywhere. Resume is set too. It needs no acknowledgement.
	Confirmed bool

	scope, bucket string // as keys name them; bucket "" for a whole scope
}

// Concerns reports whether the notice is about bucket of scope: a notice
// about a whole scope concerns each of its buckets and the scope itself
// (bucket ""); one about a bucket concerns that bucket only.
func (n Notice) Concerns(scope, bucket string) bool {
	if n.Subscribed || n.Confirmed || keyPart(scope) != n.scope {
		return false
	}
	if n.bucket == "" {
		return true
	}
	return bucket != "" && keyPart(bucket) == n.bucket
}

// A Listener receives the notices every process sharing the limiter's
// Redis and prefix tells. Close it when done.
type Listener struct {
	lim  *Limiter
	ps   *redis.PubSub
	out  chan Notice
	done chan struct{}
}

// Listen subscribes to the notices, and returns once Redis has confirmed
// the subscription: every notice told from then on reaches the Listener,
// unless its connection is lost, after which it subscribes again and
// sends a Notice with Subscribed set.
func (l *Limiter) Listen(ctx context.Context) (*Listener, error) {
	ps := l.client.Subscribe(ctx, l.controlChannel())
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, redisError(ctx, "listen", err)
	}
	ln := &Listener{lim: l, ps: ps, out: make(chan Notice, 16), done: make(chan struct{})}
	go ln.forward(ps.ChannelWithSubscriptions())
	return ln, nil
}

// Notices returns the channel the notices arrive on; it is closed when
// the Listener is.
func (ln *Listener) Notices() <-chan Notice { return ln.out }

// Applied acknowledges a notice to the tool waiting for it (see ops.Operator.Confirm).
func (ln *Listener) Applied(ctx context.Context, n Notice) error {
	if n.Subscribed || n.Confirmed {
		return nil
	}
	if err := ln.lim.client.Publish(ctx, ln.lim.appliedChannel(), n.ID).Err(); err != nil {
		return redisError(ctx, "listen", err)
	}
	return nil
}

// Close ends the subscription.
func (ln *Listener) Close() error {
	select {
	case <-ln.done:
		return nil
	default:
	}
	close(ln.done)
	return ln.ps.Close()
}

// forward turns what the subscription receives into Notices, until it
// closes; a message that is not a notice of this format is dropped.
func (ln *Listener) forward(in <-chan any) {
	defer close(ln.out)
	for m := range in {
		var n Notice
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			n.Subscribed = true
		case *redis.Message:
			var ok bool
			if n, ok = readNotice(m.Payload); !ok {
				continue
			}
		default:
			continue
		}
		select {
		case ln.out <- n:
		case <-ln.done:
			return
		}
	}
}

// readNotice reads control.lua's "<op> <id> <left µs> <scope> <bucket>",
// and confirm's "resumed <id> 0 <scope> <bucket>" (the resume's
// confirmation).
func readNotice(s string) (Notice, bool) {
	f := strings.Split(s, " ")
	if len(f) != 5 || (f[0] != "pause" && f[0] != "resume" && f[0] != "resumed") || f[1] == "" || f[3] == "" {
		return Notice{}, false
	}
	if f[0] == "resumed" {
		return Notice{ID: f[1], Resume: true, Confirmed: true, scope: f[3], bucket: f[4]}, true
	}
	left, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || left < 0 {
		return Notice{}, false
	}
	return Notice{ID: f[1], Resume: f[0] == "resume", Left: time.Duration(left) * time.Microsecond, scope: f[3], bucket: f[4]}, true
}
