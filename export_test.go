package tollgate

import "time"

// SetClock makes t read the local time from now instead of time.Now, so
// that tests move it instead of sleeping: the known-exhausted cache, the
// outage probe's interval, lease and pause instants all follow it.
func SetClock(t *Transport, now func() time.Time) { t.now = now }
