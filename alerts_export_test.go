package tollgate

import (
	"context"
	"time"
)

// CheckAlerts runs t's check of the windows it spent in now, as its
// goroutine does every few seconds; it does nothing when t's Trace has no
// alert functions.
func CheckAlerts(t *Transport) {
	if t.alerts != nil {
		t.alerts.check(context.Background())
	}
}

// SetAlertEvery sets how often Transports built from now on check their
// windows, and returns a func that restores the default. Tests that call
// it do not run in parallel.
func SetAlertEvery(d time.Duration) (restore func()) {
	old := alertEvery
	alertEvery = d
	return func() { alertEvery = old }
}
