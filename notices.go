package tollgate

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/quota"
)

// Pauses and resumes told by other processes. A request that spends from
// a lease, or that the known-exhausted cache refuses, asks Redis nothing,
// so a pause set there (by cmd/tollgate pause, another process's
// Transport.Pause or an upstream's 429) would reach it only when the lease
// ends, and a resume would not clear the cache before the pause's end; a
// request waiting for its turn was decided before the pause. So while the
// Transport holds a lease, remembers a refusal or has requests waiting, it
// listens to what the others tell (quota.Limiter.Listen): a pause ends the
// leases it concerns, is remembered as a refusal, and stops the waits it
// concerns (waiters.go); a resume forgets the refusals it concerns; and
// each notice is acknowledged once applied, so that the
// operator's command returns only when every process has stopped (or may
// go on). The rest of the time nothing listens: a request that asks Redis
// finds the pause there.

// listening is the Transport's subscription to the notices, while it has
// anything a notice must reach.
type listening struct {
	start sync.Mutex // held while a subscription is made

	mu      sync.Mutex
	ln      *quota.Listener // nil when not listening
	wanted  uint64          // counts the calls for a subscription
	users   int             // callers about to take a lease
	retry   time.Time       // no new attempt before, after one failed
	closed  bool
	stopped chan struct{} // closed to end the loop
	loops   sync.WaitGroup

	// state is a generation, shifted left, with its lowest bit set while
	// the subscription is live: a new subscription, its loss, and each
	// pause applied start a new generation (see heard).
	state atomic.Uint64
}

// heard returns the generation of what the Transport hears, or 0 while it
// does not listen: a request that waited sees the same value after its
// wait only if every pause told meanwhile would have reached it.
func (l *listening) heard() uint64 {
	if v := l.state.Load(); v&1 == 1 {
		return v
	}
	return 0
}

// next starts a new generation, live or not.
func (l *listening) next(live bool) {
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

// nextIfLive starts a new generation, as live as the last.
func (l *listening) nextIfLive() { l.next(l.state.Load()&1 == 1) }

// listenCheck is how often the loop looks whether it is still needed;
// listenRetry how long the Transport waits to try again after it could
// not subscribe (Redis down, or a user without the right to).
const (
	listenCheck = time.Second
	listenRetry = 10 * time.Second
)

// listen makes sure the Transport listens before it takes a lease, so
// that a pause told after the lease was granted reaches it; unlisten
// follows once the lease is held (or not taken). A failure to subscribe is
// logged, not returned: the lease's term still bounds how long a missed
// pause goes unseen. Once the Transport listens, a leased request only
// counts itself in: it neither waits for l.start nor allocates.
func (t *Transport) listen(ctx context.Context) {
	l := &t.listening
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
	t.subscribe(ctx)
}

// unlisten ends what listen began.
func (t *Transport) unlisten() {
	l := &t.listening
	l.mu.Lock()
	l.users--
	l.mu.Unlock()
}

// listenSoon makes the Transport listen without making its caller wait:
// it has just remembered a refusal.
func (t *Transport) listenSoon() {
	l := &t.listening
	l.mu.Lock()
	l.wanted++
	busy := l.ln != nil || l.closed || t.now().Before(l.retry)
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
		t.subscribe(ctx)
	}()
}

// subscribe listens, unless the Transport does already; l.start is held.
func (t *Transport) subscribe(ctx context.Context) {
	l := &t.listening
	l.mu.Lock()
	skip := l.ln != nil || l.closed || t.now().Before(l.retry) || t.probe.down.Load()
	l.mu.Unlock()
	if skip {
		return
	}
	ln, err := t.cfg.Limiter.Listen(ctx)
	if err != nil {
		l.mu.Lock()
		l.retry = t.now().Add(listenRetry)
		l.mu.Unlock()
		t.log(ctx, slog.LevelWarn, "tollgate: cannot listen for pauses other processes tell; leases and refusals held here see them late",
			slog.Any("err", err))
		return
	}
	// Refusals decided before the subscription may predate a resume that
	// nobody heard: ask Redis whether their pauses still hold.
	t.checkPauses(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		ln.Close()
		return
	}
	l.ln, l.stopped = ln, make(chan struct{})
	l.next(true)
	l.loops.Add(1)
	go t.hear(ln, l.stopped)
}

// hear applies what ln receives until the Transport no longer needs to
// listen, or closes.
func (t *Transport) hear(ln *quota.Listener, stopped <-chan struct{}) {
	l := &t.listening
	defer l.loops.Done()
	defer ln.Close()
	tick := time.NewTicker(listenCheck)
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
				t.checkPauses(ctx)
			} else {
				t.applyNotice(ctx, n)
				if err := ln.Applied(ctx, n); err != nil {
					t.log(ctx, slog.LevelDebug, "tollgate: could not acknowledge a pause or resume", slog.Any("err", err))
				}
			}
			cancel()
		case <-tick.C:
			l.mu.Lock()
			wanted := l.wanted
			l.mu.Unlock()
			needed := t.leases.live() || t.exhausted.live(t.now())
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

// applyNotice makes a notice hold in this process: a pause ends the leases it
// concerns and is remembered as a refusal of the scope buckets this
// process knows; a resume forgets the refusals it concerns.
func (t *Transport) applyNotice(ctx context.Context, n quota.Notice) {
	if n.Resume {
		t.exhausted.forget(func(scope, bucket string) bool { return n.Concerns(scope, bucket) })
		return
	}
	t.listening.nextIfLive() // a request that waited through it reads Redis, unless stopped here
	now := t.now()
	until := now.Add(n.Left)
	reads := &pauseReads{t: t, n: n, now: now}
	t.stopWaiters(ctx, reads)
	for _, k := range t.described.known() {
		switch {
		case n.Concerns(k.scope, ""):
			pw := reads.of(ctx, k.scope, "")
			t.exhausted.note(k.scope, "", 0, pw.cause, pw.reason, until, now)
		case n.Concerns(k.scope, k.bucket):
			pw := reads.of(ctx, k.scope, k.bucket)
			t.exhausted.note(k.scope, k.bucket, 0, pw.cause, pw.reason, until, now)
		}
	}
	t.leases.end(ctx, func(k leaseKey) bool { return n.Concerns(k.scope, k.bucket) })
}

// checkPauses forgets the pauses remembered that Redis no longer holds.
func (t *Transport) checkPauses(ctx context.Context) {
	for _, k := range t.exhausted.pauses(t.now()) {
		scope, err := t.cfg.Limiter.PauseOf(ctx, k.scope, "")
		if err != nil || !scope.Until.IsZero() {
			continue
		}
		if k.bucket != "" {
			if p, err := t.cfg.Limiter.PauseOf(ctx, k.scope, k.bucket); err != nil || !p.Until.IsZero() {
				continue
			}
		}
		t.exhausted.forget(func(scope, bucket string) bool { return scope == k.scope && bucket == k.bucket })
	}
}

// deafen ends the subscription while Redis is down: it would only try to
// connect again, nothing can be told meanwhile, and a Redis restarted may
// not know the user yet. The next lease or remembered refusal after Redis
// answers again listens anew, and reads the pauses then.
func (t *Transport) deafen() {
	l := &t.listening
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		close(l.stopped)
		l.ln = nil
		l.next(false)
	}
}

// stopListening ends the subscription for good: the Transport closes.
func (t *Transport) stopListening() {
	l := &t.listening
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

// pauseReason cuts a reason to what a pause may carry, on a character's
// boundary.
func pauseReason(s string) string {
	if len(s) <= quota.MaxReason {
		return s
	}
	cut := quota.MaxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
