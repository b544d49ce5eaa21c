package forecast

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Text says the forecast in one sentence, instants in loc (UTC when nil),
// e.g. "at this rate, spent at 14:05 PDT, 9h58m before the reset" or "at
// this rate, never spent: units leave as fast as they come".
func (f Forecast) Text(loc *time.Location) string {
	switch {
	case f.Kind == "bucket":
		return "a token bucket: see its level"
	case f.Early && !f.Spent.After(f.Now) && f.Kind == "sliding":
		return fmt.Sprintf("spent already, %s before units come back", Duration(f.Before()))
	case f.Early && !f.Spent.After(f.Now):
		return fmt.Sprintf("spent already, %s before the reset", Duration(f.Before()))
	case f.Early && f.Kind == "sliding":
		if d := f.Before(); d >= time.Second {
			return fmt.Sprintf("at this rate, spent %s, %s before units come back", when(f.Spent, f.Now, loc), Duration(d))
		}
		return fmt.Sprintf("at this rate, spent %s, and units come back only as fast as they go", when(f.Spent, f.Now, loc))
	case f.Early:
		return fmt.Sprintf("at this rate, spent %s, %s before the reset", when(f.Spent, f.Now, loc), Duration(f.Before()))
	case f.Kind == "sliding":
		if f.Rate == 0 {
			return "at this rate, never spent: nothing spent lately"
		}
		return "at this rate, never spent: units leave as fast as they come"
	case f.Spent.IsZero():
		return fmt.Sprintf("at this rate, not spent before the reset %s: nothing spent lately", when(f.Back, f.Now, loc))
	}
	return fmt.Sprintf("at this rate, not spent before the reset %s: it would take %s more", when(f.Back, f.Now, loc), Duration(f.Spent.Sub(f.Back)))
}

// when renders t for a sentence read at now: "at 14:05 PDT" the same local
// day, with seconds when t is within the hour, and "on Fri Nov 27 at 00:00
// PST" on another day.
func when(t, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	t, now = t.In(loc), now.In(loc)
	layout := "15:04 MST"
	if d := t.Sub(now); d < time.Hour && d > -time.Hour {
		layout = "15:04:05 MST"
	}
	if ty, tm, td := t.Date(); ty != now.Year() || tm != now.Month() || td != now.Day() {
		return "on " + t.Format("Mon Jan 2") + " at " + t.Format(layout)
	}
	return "at " + t.Format(layout)
}

// Duration renders d for a person, to the precision its size calls for:
// "9h58m", "3d4h", "2m30s", "4.2s", "350ms".
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d >= 72*time.Hour:
		d = d.Round(time.Hour)
		days, hours := d/(24*time.Hour), (d%(24*time.Hour))/time.Hour
		if hours == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, hours)
	case d >= time.Hour:
		d = d.Round(time.Minute)
		h, m := d/time.Hour, (d%time.Hour)/time.Minute
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case d >= time.Minute:
		d = d.Round(time.Second)
		m, s := d/time.Minute, (d%time.Minute)/time.Second
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// perSecond renders a rate in units per second with three significant
// figures (whole units from 100 on), e.g. "66.7/s", "0.0231/s" or "4000/s".
func perSecond(r float64) string {
	if r == 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return "0/s"
	}
	if r >= 100 {
		return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'g', 3, 64) + "/s"
}
