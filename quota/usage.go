package quota

import (
	"context"
	"strconv"
	"time"
)

// Usage is how much of one limit of a bucket is spent, read at one instant.
// Instants are on the clock the limiter decides with.
type Usage struct {
	// Limit is the limit read, e.g. 9500/day@America/Los_Angeles.
	Limit Limit
	// Now is the instant the usage was read at.
	Now time.Time
	// Used is the units counted in the window at Now, holds included, e.g.
	// 9400. For a token bucket, the units out of it: its capacity
	// (Limit.Units) less its level.
	Used int64
	// Held is the part of Used in holds dated after Now, e.g. 100.
	Held int64
	// Remaining is Limit.Units minus Used, never below zero, e.g. 100: a
	// token bucket's level.
	Remaining int64
	// NextFree is when the oldest counted units leave the window, so that
	// room grows (a token bucket: when it holds a unit more); zero when
	// nothing is counted.
	NextFree time.Time
	// Reset is when every unit counted now has left the window: the next
	// local midnight for a calendar day, the instant a token bucket is
	// full again. Zero for an empty sliding window or a full bucket.
	Reset time.Time
	// PausedUntil is when a pause of the bucket or of its scope ends, when
	// one is in force at Now; zero otherwise. See [Limiter.Pause].
	PausedUntil time.Time
}

// Usage reads, writing nothing, how much of limit is spent in a bucket of a
// scope; for status displays and metrics.
func (l *Limiter) Usage(ctx context.Context, scope, bucket string, limit Limit) (Usage, error) {
	if err := l.check(scope); err != nil {
		return Usage{}, err
	}
	if err := limit.Validate(); err != nil {
		return Usage{}, err
	}
	w := l.window(scope, bucket, limit)
	now, clockArg := l.clockArg()
	args := []any{clockArg, l.span(w, limit, &now)}
	keys := []string{w.log, w.meta, w.pause, w.scopePause}
	script := usageScript
	if limit.refilling() {
		script = bucketUsageScript // a token bucket's level
		args = append(args, limit.Units)
	}
	v, err := script.Run(ctx, l.client, keys, args...).Int64Slice()
	if err != nil {
		return Usage{}, redisError(ctx, "usage", err)
	}
	if len(v) != 6 {
		return Usage{}, &RedisError{Op: "usage", Err: errReply(v)}
	}
	u := Usage{
		Limit:     limit,
		Now:       time.UnixMicro(v[0]),
		Used:      v[1],
		Held:      v[2],
		Remaining: max(limit.Units-v[1], 0),
		NextFree:  instant(v[3]),
		Reset:     instant(v[4]),
	}
	if v[5] > v[0] {
		u.PausedUntil = time.UnixMicro(v[5])
	}
	return u, nil
}

// instant converts µs to a time, keeping 0 as the zero time.
func instant(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// clockArg returns, when WithClock was given, the caller's instant and the
// scripts' clock argument (µs); otherwise the zero time and "", which lets
// Redis use its own clock.
func (l *Limiter) clockArg() (time.Time, string) {
	if l.clock != nil {
		t := l.clock()
		return t, strconv.FormatInt(t.UnixMicro(), 10)
	}
	return time.Time{}, ""
}

// span returns the script argument naming a window's extent: its length in
// µs for a sliding window, or the midnights of its zone around *now for a
// calendar day, reading the local clock into *now when it is still unset:
// only calendar limits need a local time.
func (l *Limiter) span(w *window, lim Limit, now *time.Time) any {
	if !lim.Calendar && !lim.Fixed {
		return w.length
	}
	if now.IsZero() {
		*now = time.Now()
	}
	if lim.Fixed {
		if lim.sliding() {
			return w.length
		}
		return fixedSpan(lim, *now)
	}
	return l.calendar.get(*now, lim.Location)
}

// fixedSpan is the span of a fixed window: the instants that bound the
// window holding now (the one that ends at lim.Ends, or, once it has
// passed, the one that follows it by whole windows), the window before it
// and the two after it, in µs joined by commas, as log.lua's limit() reads
// a calendar. The script decides on the Redis server's clock, which may
// run behind this process's by up to a window (or ahead by two) before
// the decision fails for want of a window.
func fixedSpan(lim Limit, now time.Time) string {
	end, w := lim.Ends.UnixMicro(), lim.Window.Microseconds()
	if t := now.UnixMicro(); t >= end {
		end += (1 + (t-end)/w) * w
	}
	b := make([]byte, 0, 90)
	for i := int64(-2); i <= 2; i++ {
		if i > -2 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, end+i*w, 10)
	}
	return string(b)
}
