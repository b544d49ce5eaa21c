package quota

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
}

// Announce holds a bucket's windows (its sliding and fixed limits; calendar
// days reset on their own) to what its upstream announced: when the
// upstream counts more units used than a window does (spent by others
// sharing the credential), the difference is counted there as spent, for
// every process, until the announced reset and no later. It is a level:
// processes that read the same announcement count it once, and an
// announcement older than the newest recorded (an earlier reset) changes
// nothing. When the upstream counts fewer, nothing is given back. It
// returns the units now counted as spent elsewhere (0 when the upstream
// agrees) and whether this call changed them.
//
// The newest announcement is also kept, so that every process can learn a
// limit from it (LastAnnouncement).
func (l *Limiter) Announce(ctx context.Context, scope, bucket string, a Announcement, limits ...Limit) (outside int64, changed bool, err error) {
	if err := l.check(scope); err != nil {
		return 0, false, err
	}
	if a.Used < 0 || a.Used > MaxUnits || a.Limit < 0 || a.Limit > MaxUnits || a.Window < 0 || a.Reset.IsZero() {
		return 0, false, invalid("announcement", "units must be between 0 and MaxUnits, the window not negative, the reset given")
	}
	now, clockArg := l.clockArg()
	keys := make([]string, 0, 3*len(limits)+1)
	args := []any{clockArg, a.Used, a.Reset.UnixMicro(), a.Limit, a.Window.Microseconds()}
	for _, lim := range limits {
		if err := lim.Validate(); err != nil {
			return 0, false, err
		}
		if lim.Calendar {
			continue
		}
		w := l.window(scope, bucket, lim)
		keys = append(keys, w.meta, w.sum, w.log)
		args = append(args, l.span(w, lim, &now))
	}
	keys = append(keys, l.announcedKey(scope, bucket))
	v, err := l.run(ctx, announceScript, keys, args...)
	if err != nil {
		return 0, false, redisError(ctx, "announce", err)
	}
	list, _ := v.([]any)
	if len(list) != 3 {
		return 0, false, &RedisError{Op: "announce", Err: errReply(v)}
	}
	outside, _ = list[0].(int64)
	ch, _ := list[1].(int64)
	return outside, ch == 1, nil
}

// announcedKey is where a bucket's newest announcement is kept.
func (l *Limiter) announcedKey(scope, bucket string) string {
	return l.scopeKey(scope) + keyPart(bucket) + ":announced"
}

// LastAnnouncement returns the newest announcement Announce recorded for a
// bucket of scope, while its reset has not passed, and false when there is
// none: what a process that starts learns from the others. Used is not
// kept: it is 0.
func (l *Limiter) LastAnnouncement(ctx context.Context, scope, bucket string) (Announcement, bool, error) {
	if err := l.check(scope); err != nil {
		return Announcement{}, false, err
	}
	v, err := l.client.Get(ctx, l.announcedKey(scope, bucket)).Result()
	if errors.Is(err, redis.Nil) {
		return Announcement{}, false, nil
	}
	if err != nil {
		return Announcement{}, false, redisError(ctx, "announce", err)
	}
	f := strings.Split(v, ":")
	var n [3]int64
	if len(f) != 3 {
		return Announcement{}, false, &formatError{msg: l.announcedKey(scope, bucket) + " holds an announcement of a Redis format this tollgate cannot read"}
	}
	for i, s := range f {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil || n[i] < 0 {
			return Announcement{}, false, &formatError{msg: l.announcedKey(scope, bucket) + " holds an announcement of a Redis format this tollgate cannot read"}
		}
	}
	return Announcement{Reset: time.UnixMicro(n[0]), Limit: n[1], Window: time.Duration(n[2]) * time.Microsecond}, true, nil
}
