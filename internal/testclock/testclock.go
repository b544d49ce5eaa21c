// Package testclock is a clock that tests move by hand, to cross windows
// and intervals without sleeping. Its Now fits quota.WithClock and the
// clock seams of tollgate's other packages.
package testclock

import (
	"sync"
	"time"
)

// Clock reads the instant it was last set to. It is safe for concurrent
// use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
