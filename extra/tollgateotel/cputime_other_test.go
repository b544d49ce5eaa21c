//go:build !linux

package tollgateotel_test

import "time"

// threadClock returns the wall clock where a thread's CPU time is not at
// hand.
func threadClock() (now func() time.Duration, done func()) {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }, func() {}
}
