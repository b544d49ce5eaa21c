package tollgate

import (
	"context"
	"time"
)

// SetClock makes t read the local time from now instead of time.Now, so
// that tests move it instead of sleeping: the refusals and pauses it
// remembers, the outage probe's interval, lease instants and terms, and
// the instants of requests and responses all follow it. The wall clock is
// read only against context deadlines and Transit.
func SetClock(t *Transport, now func() time.Time) { t.clock.now = now }

// SlowHandoff makes t call f on every request it has decided, just before
// checking that the request is handed to the base transport within
// Transit of its admission: f stands for a loaded machine or a slow hook.
func SlowHandoff(t *Transport, f func()) { t.beforeHandoff = f }

// The defaults a Config or Policy that says nothing gets, for the tests.
const (
	DefaultScope   = defaultScope
	DefaultTransit = defaultTransit
	DefaultMaxWait = defaultMaxWait
)

// StopSpendWriter stops t's writer of what it spends (Config.Name), so
// that a test writes it with FlushSpending at the instants it chooses.
func StopSpendWriter(t *Transport) {
	t.flusher.stop()
	<-t.flusher.done
}

// FlushSpending writes, at now, what t spent, as its writer would.
func FlushSpending(t *Transport, now time.Time) error {
	return t.hooks.spend.Flush(context.Background(), now)
}

// NeedsChecked waits until t's check of what the Redis keeps has ended
// (at once without a Logger, which has none).
func NeedsChecked(t *Transport) {
	if t.needs != nil {
		<-t.needs.done
	}
}
