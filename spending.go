package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/quota"
)

// Who spends: every Transport keeps what it spends, what of it waits and
// what is refused, per scope, bucket, endpoint and caller
// (internal/spend), and writes it to the Redis of Config.Limiter, under
// its prefix, off the request's path: at most once every few seconds, and
// never while idle, and once more when the Transport closes (the
// records then age out with their span). tollgate status shows it per bucket: the top
// spenders, the requests waiting and the oldest wait, the refusals by
// cause. The request's path only adds to counters in memory: no command
// is added to a decision.
//
// A Transport whose Limiter is in-process (package quota/embedded)
// records too, into that in-process Redis, where only its own process
// reads it; the FailLocal mode's decisions, made while Redis is down, are
// counted as any, and written when Redis answers again (the recorder
// keeps a failed write's counts for the next).

// limiterStore is the client and key prefix of a Limiter (internal/quotapath).
var limiterStore = quotapath.Store.(func(l *quota.Limiter) (redis.UniversalClient, string))

// spendFlusher runs the recorder's writes on a goroutine of its own until
// the Transport closes.
type spendFlusher struct {
	stop context.CancelFunc
	done chan struct{}
}

// startSpending builds the Transport's recorder, named name (Config.Name,
// or spend.DefaultProcess()), and starts its writer.
func (t *Transport) startSpending(name string, interval time.Duration) error {
	if name == "" {
		name = spend.DefaultProcess()
	}
	client, prefix := limiterStore(t.cfg.Limiter)
	h := t.hooks
	rec, err := spend.New(client, spend.Options{Process: name, Prefix: prefix, Interval: interval, OnError: func(err error) {
		h.log(context.Background(), slog.LevelWarn, "tollgate: could not write what this process spends; its counts wait for the next write", slog.Any("err", err))
	}})
	if err != nil {
		return configErrorf("Name %q: %v", name, err)
	}
	t.hooks.spend = rec
	ctx, cancel := context.WithCancel(context.Background())
	t.flusher = spendFlusher{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.flusher.done)
		rec.Run(ctx)
	}()
	return nil
}

// stopSpending stops the writer and writes what this process spent since
// its last write: its records stay until they age out with their span,
// so that status shows among those that spent a process that ran for a
// few seconds (a cron job), and the refusals of each run.
func (t *Transport) stopSpending(ctx context.Context) error {
	if t.flusher.stop == nil {
		return nil
	}
	t.flusher.stop()
	<-t.flusher.done
	return t.hooks.spend.Close(ctx, time.Now())
}

// spent counts the units a request sent spends, times sign (-1: given
// back, the request never reached the upstream): per bucket, in the scope
// it spends from. Free requests and requests sent on a route with no
// scope spend nothing.
func (h *hooks) spent(r *request, sign int64) {
	if h.spend == nil || r.endpoint.Free || (r.route != nil && r.route.Scope == "") {
		return
	}
	scope, caller := r.spending(), callerOf(r.req.Context())
	for _, ch := range r.endpoint.Charges {
		h.spend.Spend(scope, ch.Bucket, r.endpoint.Name, caller, sign*ch.Units)
	}
}

// corrected counts a settlement's correction of a bucket: units more
// (or, negative, fewer) than the request was admitted with.
func (h *hooks) corrected(r *request, bucket string, units int64) {
	h.spend.Spend(r.spending(), bucket, r.endpoint.Name, callerOf(r.req.Context()), units)
}

// refusedBy counts a request that was not sent because of err, by cause:
// a *QuotaError's, or Redis down for an *UnavailableError. Other errors
// (the caller gave up, a configuration error) are no refusals.
func (h *hooks) refusedBy(r *request, err error) {
	if h.spend == nil {
		return
	}
	var qe *QuotaError
	var ue *UnavailableError
	switch {
	case errors.As(err, &qe):
		h.spend.Refuse(qe.Scope, qe.Bucket, r.endpoint.Name, callerOf(r.req.Context()), spendCause(qe.Cause))
	case errors.As(err, &ue):
		h.spend.Refuse(ue.Scope, "", r.endpoint.Name, callerOf(r.req.Context()), spend.RedisDown)
	}
}

// spendCause is how the records spell a Cause.
func spendCause(c Cause) spend.Cause {
	switch c {
	case PausedByUpstream:
		return spend.UpstreamPause
	case PausedByOperator:
		return spend.OperatorPause
	case CapFull:
		return spend.CapFull
	case RedisDown:
		return spend.RedisDown
	}
	return spend.NoRoom
}

// waiting is a request's wait counted for status, on each bucket it
// charges: one without allocating, more in a slice.
type waiting struct {
	one  spend.Wait
	more []spend.Wait
}

// beginWait counts the request waiting, since now, on each bucket it
// charges.
func (h *hooks) beginWait(r *request, now time.Time) waiting {
	var w waiting
	if h.spend == nil {
		return w
	}
	caller := callerOf(r.req.Context())
	for i, ch := range r.endpoint.Charges {
		sw := h.spend.BeginWait(r.scope, ch.Bucket, caller, now)
		if i == 0 {
			w.one = sw
		} else {
			w.more = append(w.more, sw)
		}
	}
	return w
}

// end ends the wait.
func (w waiting) end() {
	w.one.End()
	for _, sw := range w.more {
		sw.End()
	}
}
