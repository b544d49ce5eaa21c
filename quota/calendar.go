package quota

import (
	"strconv"
	"sync"
	"time"

	_ "time/tzdata" // calendar limits name zones; bare machines may lack a zoneinfo database
)

// The script cannot convert instants to local dates, so the caller sends the
// midnights around its own clock: from daysBefore days before today to
// daysAfter days after. The script picks the day holding its own clock's
// instant, which tolerates a day of skew between caller and Redis, and can
// place holds up to daysAfter-1 days ahead; further is refused as beyond
// the calendar. Every midnight is an argument of every decision, so they
// are few.
const (
	daysBefore = 1
	daysAfter  = 3
)

// midnights returns the starts of the local days around t in loc, oldest
// first. Days are walked by date, not by adding 24 hours, so a 23- or
// 25-hour day at a daylight saving change has its true length.
func midnights(t time.Time, loc *time.Location) []time.Time {
	y, m, d := t.In(loc).Date()
	out := make([]time.Time, 0, daysBefore+daysAfter+1)
	for i := -daysBefore; i <= daysAfter; i++ {
		out = append(out, time.Date(y, m, d+i, 0, 0, 0, 0, loc))
	}
	return out
}

// calendarArgs caches, per location, the script arguments for the day that
// holds the current time, so a decision does not recompute midnights.
type calendarArgs struct {
	mu    sync.Mutex
	byLoc map[*time.Location]dayArgs
}

type dayArgs struct {
	from, to time.Time // the day these arguments were computed for
	args     []any     // count, then the midnights in µs as strings
}

// get returns the count and midnights around t in loc, as script arguments.
func (c *calendarArgs) get(t time.Time, loc *time.Location) []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byLoc[loc]; ok && !t.Before(d.from) && t.Before(d.to) {
		return d.args
	}
	days := midnights(t, loc)
	args := make([]any, 0, len(days)+1)
	args = append(args, strconv.Itoa(len(days)))
	for _, m := range days {
		args = append(args, strconv.FormatInt(m.UnixMicro(), 10))
	}
	if c.byLoc == nil {
		c.byLoc = make(map[*time.Location]dayArgs)
	}
	c.byLoc[loc] = dayArgs{from: days[daysBefore], to: days[daysBefore+1], args: args}
	return args
}
