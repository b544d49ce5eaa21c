package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// barWidth is the width of a used / limit bar, in characters.
const barWidth = 20

// writeJSON writes the report for scripts.
func writeJSON(w io.Writer, r *report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText writes the report for people: per scope, its pause; per
// bucket, its pause and, per window, spent / limit as a bar, what is left
// (and held apart for waiting requests) and when units free up; then what
// is under way.
func writeText(out io.Writer, r *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tollgate status at %s, prefix %q: %s\n", r.At.UTC().Format("2006-01-02 15:04:05 MST"), r.Prefix, count(len(r.Scopes), "scope"))
	for _, s := range r.Scopes {
		b.WriteString("\n")
		name := "scope " + s.Scope
		if s.Hashed {
			name += " (a hashed name no process described)"
		}
		b.WriteString(name)
		if s.Pause != nil {
			b.WriteString("  " + pauseText(s.Pause, r.At))
		}
		if s.BackgroundWaiting > 0 {
			fmt.Fprintf(&b, "  %s waiting", count(s.BackgroundWaiting, "background request"))
		}
		b.WriteString("\n")
		if s.Err != "" {
			b.WriteString("  cannot be read: " + s.Err + "\n")
		}
		writeSpending(&b, "  ", s.Spending, r.At)
		for _, bk := range s.Buckets {
			writeBucket(&b, bk, r.At)
		}
	}
	writeActions(&b, r)
	_, err := io.WriteString(out, b.String())
	return err
}

func writeBucket(b *strings.Builder, bk bucketReport, now time.Time) {
	b.WriteString("  bucket " + bk.Bucket)
	if bk.Announced != "" {
		b.WriteString(" (follows the upstream's " + bk.Announced + ")")
	}
	if bk.Pause != nil {
		b.WriteString("  " + pauseText(bk.Pause, now))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, w := range bk.Windows {
		spent := "spent"
		if w.Refill > 0 {
			spent = "out" // a token bucket's units out of it, refilling
		}
		fmt.Fprintf(tw, "    %s\t[%s]\t%d / %d %s\t%s\t%s\n", w.Window, bar(w.Used, w.Limit), w.Used, w.Limit, spent, leftText(w, bk.Spending), freeText(w, now))
	}
	tw.Flush()
	writeTenants(b, bk)
	writeForecasts(b, bk)
	for _, name := range bk.Undescribed {
		fmt.Fprintf(b, "    window %s: limit unknown (no process described this bucket within the hour)\n", name)
	}
	var under []string
	if bk.Leases > 0 {
		under = append(under, fmt.Sprintf("%s out (%d units, until %s)", count(bk.Leases, "lease"), bk.Leased, instantText(*bk.LeasedUntil, now, time.UTC)))
	}
	if bk.InFlightCap > 0 || bk.InFlight > 0 {
		s := "in flight " + strconv.Itoa(bk.InFlight)
		if bk.InFlightCap > 0 {
			s += " / " + strconv.Itoa(bk.InFlightCap)
		}
		if bk.SlotWaiting > 0 {
			s += ", " + strconv.Itoa(bk.SlotWaiting) + " waiting for a slot"
		}
		under = append(under, s)
	}
	if len(under) > 0 {
		b.WriteString("    " + strings.Join(under, "; ") + "\n")
	}
	writeSpending(b, "    ", bk.Spending, now)
}

// bar draws what is spent out of limit; a window counting more than its
// limit (an upstream's extra charge) shows full.
func bar(used, limit int64) string {
	n := 0
	if limit > 0 {
		n = int((min(used, limit)*barWidth + limit - 1) / limit) // any use shows
	}
	return strings.Repeat("#", n) + strings.Repeat(".", barWidth-n)
}

// leftText says what is left of a window, and what is held apart for
// the requests waiting (sp, when processes report, counts them).
func leftText(w windowReport, sp *spendingReport) string {
	s := strconv.FormatInt(w.Remaining, 10) + " left"
	if w.Quota > 0 && w.Quota != w.Limit {
		s += fmt.Sprintf(" (%d kept below the upstream's %d)", w.Quota-w.Limit, w.Quota)
	}
	if w.Held > 0 {
		s += fmt.Sprintf(", %d held for %s", w.Held, waitingText(sp))
	}
	return s
}

// waitingText names the requests waiting in a bucket, counted when
// processes report them.
func waitingText(sp *spendingReport) string {
	if sp == nil || sp.Waiting == 0 {
		return "waiting requests"
	}
	if sp.Waiting == 1 {
		return "1 waiting request"
	}
	return strconv.Itoa(sp.Waiting) + " waiting requests"
}

func freeText(w windowReport, now time.Time) string {
	zone := time.UTC
	if w.zone != nil {
		zone = w.zone
	}
	var parts []string
	if w.Refill > 0 {
		// A token bucket: full again when all that is out has refilled.
		if w.Reset == nil {
			return "full"
		}
		return "full again " + instantText(*w.Reset, now, zone)
	}
	if w.zone != nil && w.Reset != nil {
		parts = append(parts, "resets "+instantText(*w.Reset, now, zone))
	} else if w.NextFree != nil {
		parts = append(parts, "next units free "+instantText(*w.NextFree, now, zone))
	}
	if len(parts) == 0 {
		return "nothing counted"
	}
	return strings.Join(parts, ", ")
}

func pauseText(p *pauseReport, now time.Time) string {
	s := "PAUSED until " + instantText(p.Until, now, time.UTC)
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// instantText shows an instant in zone and how far it is from now, e.g.
// "09:30:00 UTC (in 30m0s)"; with its date when not on now's day.
func instantText(t, now time.Time, zone *time.Location) string {
	layout := "15:04:05 MST"
	lt, ln := t.In(zone), now.In(zone)
	if lt.YearDay() != ln.YearDay() || lt.Year() != ln.Year() {
		layout = "2006-01-02 15:04:05 MST"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return lt.Format(layout) + " (now)"
	}
	return lt.Format(layout) + " (in " + d.String() + ")"
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// writeTenants writes, under a bucket with a pace or shares, its pace
// line by now and what each tenant spent in each window against its
// share, and how many of its requests wait in the bucket's room.
func writeTenants(b *strings.Builder, bk bucketReport) {
	for _, w := range bk.Windows {
		if w.PaceLine != nil {
			fmt.Fprintf(b, "    pace of %s: %d of %d may be spent by now\n", w.Window, *w.PaceLine, w.Limit)
		}
		if len(w.Tenants) == 0 {
			continue
		}
		parts := make([]string, len(w.Tenants))
		for i, t := range w.Tenants {
			name := t.Name
			if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f || r == ' ' || r == ',' }) {
				name = strconv.QuoteToGraphic(name)
			}
			parts[i] = fmt.Sprintf("%s %d", name, t.Units)
			if t.Share > 0 {
				parts[i] += fmt.Sprintf(" of %.0f", t.Share)
			}
			if t.Held > 0 {
				parts[i] += fmt.Sprintf(" (+%d held later)", t.Held)
			}
			if t.Waiting > 0 {
				parts[i] += fmt.Sprintf(" (%d waiting)", t.Waiting)
			}
		}
		fmt.Fprintf(b, "    tenants of %s: %s\n", w.Window, strings.Join(parts, ", "))
	}
}
