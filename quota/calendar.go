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

// calendarArgs caches, per location, the script argument for the day that
// holds the current time, so a decision does not recompute midnights.
type calendarArgs struct {
	mu    sync.Mutex
	byLoc map[*time.Location]daySpan
}

type daySpan struct {
	from, to time.Time // the day the span was computed for
	span     any       // the midnights in µs, joined by commas: a boxed string
}

// get returns the midnights around t in loc as one script argument, the
// span that log.lua's limit() reads for a calendar day.
func (c *calendarArgs) get(t time.Time, loc *time.Location) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byLoc[loc]; ok && !t.Before(d.from) && t.Before(d.to) {
		return d.span
	}
	days := midnights(t, loc)
	var b []byte
	for i, m := range days {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, m.UnixMicro(), 10)
	}
	if c.byLoc == nil {
		c.byLoc = make(map[*time.Location]daySpan)
	}
	d := daySpan{from: days[daysBefore], to: days[daysBefore+1], span: string(b)}
	c.byLoc[loc] = d
	return d.span
}
