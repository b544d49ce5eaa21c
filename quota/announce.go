package quota

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/quotapath"
)

// An Announcement is what an upstream said of one of its quotas in a
// response: how much of it is used, until when, and, when it says so, how
// large it is and how long its window.
type Announcement struct {
	// Used is the units the upstream counts as spent until Reset, e.g.
	// 4700 of 5000.
	Used int64
	// Reset is when the upstream's count starts afresh, or for a sliding
	// limit when all of Used has left it.
	Reset time.Time
	// Limit is the quota, e.g. 5000; 0 when not announced.
	Limit int64
	// Window is the quota's window, e.g. 60s; 0 when not announced.
	Window time.Duration
	// AsOf is when the upstream took its count, as near as the caller
	// knows, on the limiter's clock: e.g. the Time of the reservation
	// whose call's response announced it. Calls admitted after it are not
	// in Used, so they are not compared with it; zero compares every
	// call admitted so far, which takes the calls in flight for others'.
	AsOf time.Time
}

// Announced is what is recorded of a bucket's announcements: the newest,
// as every process reads it, and what Announce counted as spent elsewhere.
type Announced struct {
	// Outside is the units counted as spent by others (beyond the
	// windows' own count) until Reset, e.g. 300; 0 when the upstream
	// agrees. Only Announce tells it.
	Outside int64
	// Changed reports that the call changed what is counted as spent
	// elsewhere. Only Announce tells it.
	Changed bool
	// Reset is the newest reset announced, as first read, e.g. 12:00:00:
	// an upstream that states a reset as a delay moves it a little with
	// each response, and every process must end the window at the same
	// instant.
	Reset time.Time
	// Limit is the newest limit announced, e.g. 5000; 0 when never.
	Limit int64
	// Window is the newest window announced, e.g. 60s; 0 when never.
	Window time.Duration
}

// Announce holds a bucket's windows (its sliding and fixed limits; calendar
// days reset on their own) to what its upstream announced: when the
// upstream counts more units used than a window does (spent by others
// sharing the credential), the difference is counted there as spent, for
// every process, until the announced reset and no later. It is a level:
// processes that read the same announcement count it once, and an
// announcement older than the newest recorded (a reset earlier by
// quotapath.ResetTolerance or more) changes nothing. When the upstream counts
// fewer, nothing is given back.
//
// The newest announcement is kept, so that every process can learn a
// limit, window and reset from it: Announce returns it as recorded, and
// LastAnnouncement reads it.
func (l *Limiter) Announce(ctx context.Context, scope, bucket string, a Announcement, limits ...Limit) (Announced, error) {
	if err := l.check(scope); err != nil {
		return Announced{}, err
	}
	if a.Used < 0 || a.Used > MaxUnits || a.Limit < 0 || a.Limit > MaxUnits || a.Window < 0 || a.Reset.IsZero() {
		return Announced{}, invalid("announcement", "units must be between 0 and MaxUnits, the window not negative, the reset given")
	}
	now, clockArg := l.clockArg()
	keys := make([]string, 0, 2*len(limits)+1)
	var asOf int64
	if !a.AsOf.IsZero() {
		asOf = max(a.AsOf.UnixMicro(), 1)
	}
	args := []any{clockArg, a.Used, a.Reset.UnixMicro(), a.Limit, a.Window.Microseconds(), nil, asOf}
	tol := quotapath.ResetTolerance(a.Window)
	for _, lim := range limits {
		if err := lim.Validate(); err != nil {
			return Announced{}, err
		}
		if lim.Calendar {
			continue
		}
		tol = min(tol, quotapath.ResetTolerance(lim.Window))
		w := l.window(scope, bucket, lim)
		keys = append(keys, w.meta, w.log)
		args = append(args, l.span(w, lim, &now))
	}
	keys = append(keys, l.announcedKey(scope, bucket))
	args[5] = max(tol.Microseconds(), 1)
	v, err := l.run(ctx, announceScript, keys, args...)
	if err != nil {
		return Announced{}, redisError(ctx, "announce", err)
	}
	var n [6]int64
	list, _ := v.([]any)
	if len(list) != len(n) {
		return Announced{}, &RedisError{Op: "announce", Err: errReply(v)}
	}
	for i, x := range list {
		n[i], _ = x.(int64)
	}
	out := announced(n[3], n[4], n[5])
	out.Outside, out.Changed = n[0], n[1] == 1
	return out, nil
}

// announced builds the state recorded from its fields, in µs.
func announced(reset, limit, window int64) Announced {
	return Announced{Reset: time.UnixMicro(reset), Limit: limit, Window: time.Duration(window) * time.Microsecond}
}

// announcedKey is where a bucket's newest announcement is kept.
func (l *Limiter) announcedKey(scope, bucket string) string {
	return l.scopeKey(scope) + keyPart(bucket) + ":announced"
}

// LastAnnouncement returns the newest announcement Announce recorded for a
// bucket of scope (Outside and Changed left zero), while its reset has not
// passed, and false when there is none: what a process learns from the
// others.
func (l *Limiter) LastAnnouncement(ctx context.Context, scope, bucket string) (Announced, bool, error) {
	if err := l.check(scope); err != nil {
		return Announced{}, false, err
	}
	key := l.announcedKey(scope, bucket)
	v, err := l.client.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return Announced{}, false, nil
	}
	if err != nil {
		return Announced{}, false, redisError(ctx, "announce", err)
	}
	f := strings.Split(v, ":")
	var n [3]int64
	if len(f) != len(n) {
		return Announced{}, false, &formatError{msg: key + " holds an announcement of a Redis format this tollgate cannot read"}
	}
	for i, s := range f {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil || n[i] < 0 {
			return Announced{}, false, &formatError{msg: key + " holds an announcement of a Redis format this tollgate cannot read"}
		}
	}
	return announced(n[0], n[1], n[2]), true, nil
}
