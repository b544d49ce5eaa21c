package anthropic

import "time"

// SetClock makes the Transport that NewTransport builds from o decide on
// the instants now returns instead of on Redis's clock (quota.WithClock).
func SetClock(o *Options, now func() time.Time) { o.clock = now }
