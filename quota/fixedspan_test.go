package quota

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFixedSpanAllowsClockSkew: the span sent for a fixed window holds the
// instants a window before this process's clock and a window after it, so
// that a Redis server whose clock runs behind or ahead (by less than a
// window) still finds its instant in it. Windows that end at an announced
// reset meet this when the upstream's clock, the Redis server's and this
// process's disagree by seconds.
func TestFixedSpanAllowsClockSkew(t *testing.T) {
	ends := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	lim := PerFixedWindow(100, time.Minute, ends)
	for _, now := range []time.Time{
		ends.Add(-time.Minute), ends.Add(-time.Microsecond), ends, ends.Add(90 * time.Second), ends.Add(time.Hour + 59*time.Second),
	} {
		var bounds []int64
		for _, f := range strings.Split(fixedSpan(lim, now), ",") {
			b, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("span at %v: %v", now, err)
			}
			bounds = append(bounds, b)
		}
		for i := 1; i < len(bounds); i++ {
			if bounds[i]-bounds[i-1] != time.Minute.Microseconds() {
				t.Fatalf("span at %v: bounds %v are not a window apart", now, bounds)
			}
			if (bounds[i]-ends.UnixMicro())%time.Minute.Microseconds() != 0 {
				t.Fatalf("span at %v: bound %d is not on the grid of the announced end", now, bounds[i])
			}
		}
		for _, skew := range []time.Duration{-time.Minute + time.Microsecond, 0, time.Minute - time.Microsecond} {
			at := now.Add(skew).UnixMicro()
			if at < bounds[0] || at >= bounds[len(bounds)-1] {
				t.Errorf("at %v, a server clock %v off (%d µs) lies outside the span %v", now, skew, at, bounds)
			}
		}
	}
}
