package forecast

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A Bucket is what becomes of a token bucket (a limit with Refill) at a
// steady rate of spending. A bucket keeps no log, so the rate comes from
// elsewhere: what the processes report they spent.
type Bucket struct {
	// Now is the instant forecast from: the Usage's Now.
	Now time.Time
	// Level is the units in the bucket, e.g. 3200.
	Level int64
	// Capacity is the most it holds, e.g. 4000.
	Capacity int64
	// Refill is the units per second it refills at, e.g. 66.7 (4000 a
	// minute).
	Refill float64
	// Rate is the units per second spent, as given, e.g. 80.
	Rate float64
	// Full is when the bucket is full again if nothing more is spent;
	// Now when it is full.
	Full time.Time
	// Outruns reports that Rate is more than Refill: the level falls.
	Outruns bool
	// Empty is when the level reaches zero at Rate, when Outruns; Now
	// when it is empty already; zero otherwise.
	Empty time.Time
}

// BucketAt forecasts the token bucket of u (u.Limit.Refill > 0) at rate
// units per second. Full is u.Reset when the engine gave one, and
// otherwise computed from the level and the refill.
func BucketAt(u quota.Usage, rate float64) Bucket {
	lim := u.Limit
	b := Bucket{Now: u.Now, Level: u.Remaining, Capacity: lim.Units, Rate: max(rate, 0)}
	if lim.Window > 0 {
		b.Refill = float64(lim.Refill) / lim.Window.Seconds()
	}
	missing := float64(lim.Units - u.Remaining)
	switch {
	case missing <= 0:
		b.Full = u.Now
	case u.Reset.After(u.Now):
		b.Full = u.Reset
	case b.Refill > 0:
		b.Full = u.Now.Add(seconds(missing / b.Refill))
	}
	b.Outruns = b.Rate > b.Refill
	switch {
	case b.Level <= 0 && b.Rate > 0:
		b.Empty = u.Now
	case b.Outruns:
		b.Empty = u.Now.Add(seconds(float64(b.Level) / (b.Rate - b.Refill)))
	}
	return b
}

// Text says the bucket's state in one sentence, instants in loc (UTC
// when nil), e.g. "level 3200 of 4000, full again at 14:05:10 PDT; at
// this rate, empty at 14:06:50 PDT: spending 80/s outruns the refill of
// 66.7/s".
func (b Bucket) Text(loc *time.Location) string {
	s := fmt.Sprintf("level %d of %d", b.Level, b.Capacity)
	if b.Level < b.Capacity && !b.Full.IsZero() {
		s += ", full again " + when(b.Full, b.Now, loc)
	}
	switch {
	case b.Outruns:
		return s + fmt.Sprintf("; at this rate, empty %s: spending %s outruns the refill of %s",
			when(b.Empty, b.Now, loc), perSecond(b.Rate), perSecond(b.Refill))
	case b.Rate > 0:
		return s + fmt.Sprintf("; the refill of %s keeps up with spending %s", perSecond(b.Refill), perSecond(b.Rate))
	}
	return s
}
