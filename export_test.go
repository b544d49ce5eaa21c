package tollgate

import "time"

// SetClock makes t read the local time from now instead of time.Now, so
// that tests move it instead of sleeping: the known-exhausted cache, the
// outage probe's interval, lease and pause instants all follow it.
func SetClock(t *Transport, now func() time.Time) { t.clock.now = now }

// SlowHandoff makes t call f on every request it has decided, just before
// checking that the request is handed to the base transport within
// Transit of its admission: f stands for a loaded machine or a slow hook.
func SlowHandoff(t *Transport, f func()) { t.beforeHandoff = f }
