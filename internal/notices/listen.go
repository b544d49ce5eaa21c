// Package notices listens to the pauses and resumes other processes tell
// (quota.Limiter.Listen) while its process has anything they must reach,
// and keeps the requests waiting that a pause must stop.
//
// A request that spends from a lease, or that a remembered refusal
// refuses, asks Redis nothing, so a pause set there would reach it only
// when the lease ends, and a resume would not clear the refusal before the
// pause's end; a request waiting for its turn was decided before the
// pause. So while its process holds a lease, remembers a refusal or has
// requests waiting, Listening listens, hands each notice to Apply, and
// acknowledges it once applied, so that the operator's command returns
// only when every process has stopped (or may go on). The rest of the time
// nothing listens: a request that asks Redis finds the pause there.
package notices

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Listening is a process's subscription to the notices, while it has
// anything a notice must reach. Set its funcs before use; it is safe for
// concurrent use.
type Listening struct {
	// Subscribe subscribes to the notices.
	Subscribe func(ctx context.Context) (*quota.Listener, error)
	// Apply makes a notice hold in the process.
	Apply func(ctx context.Context, n quota.Notice)
	// Resync reads again what notices may have been missed: called once
	// subscribed, before any notice is applied, and after a
	// resubscription.
	Resync func(ctx context.Context)
	// Needed reports whether the process still has anything a notice must
	// reach (a lease, a remembered refusal).
	Needed func() bool
	// Down reports that Redis is down: nothing is subscribed meanwhile.
	Down func() bool
	// Now reads the process's clock.
	Now func() time.Time
	// Log writes a record.
	Log func(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr)

	start sync.Mutex // held while a subscription is made

	mu      sync.Mutex
	ln      *quota.Listener // nil when not listening
	wanted  uint64          // counts the calls for a subscription
	users   int             // callers about to take a lease, or waiting
	retry   time.Time       // no new attempt before, after one failed
	closed  bool
	stopped chan struct{} // closed to end the loop
	loops   sync.WaitGroup

	// state is a generation, shifted left, with its lowest bit set while
	// the subscription is live: a new subscription, its loss, and each
	// pause applied start a new generation (see Heard).
	state atomic.Uint64
}

// Check is how often the loop looks whether it is still needed; Retry how
// long Listening waits to try again after it could not subscribe (Redis
// down, or a user without the right to).
const (
	Check = time.Second
	Retry = 10 * time.Second
)

// Heard returns the generation of what is heard, or 0 while nothing
// listens: a request that waited sees the same value after its wait only
// if every pause told meanwhile would have reached it.
func (l *Listening) Heard() uint64 {
	if v := l.state.Load(); v&1 == 1 {
		return v
	}
	return 0
}

// next starts a new generation, live or not.
func (l *Listening) next(live bool) {
	for {
		old := l.state.Load()
		v := ((old >> 1) + 1) << 1
		if live {
			v |= 1
		}
		if l.state.CompareAndSwap(old, v) {
			return
		}
	}
}

// NextIfLive starts a new generation, as live as the last: a pause was
// applied.
func (l *Listening) NextIfLive() { l.next(l.state.Load()&1 == 1) }

// Listen makes sure the process listens before it takes a lease or waits,
// so that a pause told after that reaches it; Unlisten follows once the
// lease is held (or not taken) or the wait ends. A failure to subscribe is
// logged, not returned: the lease's term still bounds how long a missed
// pause goes unseen. Once listening, a caller only counts itself in: it
// neither waits for the start nor allocates.
func (l *Listening) Listen(ctx context.Context) {
	l.mu.Lock()
	l.wanted++
	l.users++
	listening := l.ln != nil || l.closed
	l.mu.Unlock()
	if listening {
		return
	}
	l.start.Lock()
	defer l.start.Unlock()
	l.subscribe(ctx)
}

// Unlisten ends what Listen began.
func (l *Listening) Unlisten() {
	l.mu.Lock()
	l.users--
	l.mu.Unlock()
}

// Soon makes the process listen without making its caller wait: it has
// just remembered a refusal.
func (l *Listening) Soon() {
	l.mu.Lock()
	l.wanted++
	busy := l.ln != nil || l.closed || l.Now().Before(l.retry)
	if !busy {
		l.loops.Add(1)
	}
	l.mu.Unlock()
	if busy {
		return
	}
	go func() {
		defer l.loops.Done()
		if !l.start.TryLock() {
			return // another call is subscribing
		}
		defer l.start.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		l.subscribe(ctx)
	}()
}

// subscribe listens, unless it does already; l.start is held.
func (l *Listening) subscribe(ctx context.Context) {
	l.mu.Lock()
	skip := l.ln != nil || l.closed || l.Now().Before(l.retry) || l.Down()
	l.mu.Unlock()
	if skip {
		return
	}
	ln, err := l.Subscribe(ctx)
	if err != nil {
		l.mu.Lock()
		l.retry = l.Now().Add(Retry)
		l.mu.Unlock()
		l.Log(ctx, slog.LevelWarn, "tollgate: cannot listen for pauses other processes tell; leases and refusals held here see them late",
			slog.Any("err", err))
		return
	}
	// Refusals decided before the subscription may predate a resume that
	// nobody heard.
	l.Resync(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		ln.Close()
		return
	}
	l.ln, l.stopped = ln, make(chan struct{})
	l.next(true)
	l.loops.Add(1)
	go l.hear(ln, l.stopped)
}

// hear applies what ln receives until nothing needs it any more, or the
// process closes.
func (l *Listening) hear(ln *quota.Listener, stopped <-chan struct{}) {
	defer l.loops.Done()
	defer ln.Close()
	tick := time.NewTicker(Check)
	defer tick.Stop()
	for {
		select {
		case n, ok := <-ln.Notices():
			if !ok {
				l.mu.Lock()
				if l.ln == ln {
					l.ln = nil
					l.next(false)
				}
				l.mu.Unlock()
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if n.Subscribed {
				l.next(true) // notices told meanwhile were missed
				l.Resync(ctx)
			} else {
				l.Apply(ctx, n)
				if err := ln.Applied(ctx, n); err != nil {
					l.Log(ctx, slog.LevelDebug, "tollgate: could not acknowledge a pause or resume", slog.Any("err", err))
				}
			}
			cancel()
		case <-tick.C:
			l.mu.Lock()
			wanted := l.wanted
			l.mu.Unlock()
			needed := l.Needed()
			l.mu.Lock()
			if !needed && l.users == 0 && l.wanted == wanted {
				l.ln = nil
				l.next(false)
				l.mu.Unlock()
				return
			}
			l.mu.Unlock()
		case <-stopped:
			return
		}
	}
}

// Deafen ends the subscription while Redis is down: it would only try to
// connect again, nothing can be told meanwhile, and a Redis restarted may
// not know the user yet. The next Listen or Soon after Redis answers again
// listens anew, and resyncs then.
func (l *Listening) Deafen() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		close(l.stopped)
		l.ln = nil
		l.next(false)
	}
}

// Stop ends the subscription for good: the process closes.
func (l *Listening) Stop() {
	l.mu.Lock()
	l.closed = true
	if l.ln != nil {
		close(l.stopped)
		l.ln = nil
		l.next(false)
	}
	l.mu.Unlock()
	l.loops.Wait()
}
