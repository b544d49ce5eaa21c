package main

import (
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/web"
)

// whoSpends fills b with the top spenders of the bucket and the requests
// waiting for room, as status reports them (sp nil: no process reports).
func whoSpends(b *web.Bucket, sp *spendingReport, now time.Time) {
	if sp == nil {
		return
	}
	b.SpendSpan = sp.span
	b.Waiting = &web.Waiting{Requests: sp.Waiting}
	if sp.Waiting > 0 && sp.Since != nil {
		b.Waiting.Oldest = max(0, now.Sub(*sp.Since).Round(time.Second))
	}
	for _, who := range sp.Spenders {
		if who.Units <= 0 {
			break // most first: the rest spent less
		}
		name := who.Process
		if who.Caller != "" {
			name = who.Caller + " via " + who.Process
		}
		b.Spenders = append(b.Spenders, web.Spender{Name: name, Units: who.Units, Endpoint: who.Endpoint})
	}
}

// webSeries is what the page's chart draws of a window over time: the
// slices its log counts (ops.Series) and its forecast; none for a token
// bucket, which keeps no log.
func webSeries(w windowReport) ([]web.Point, *web.Forecast) {
	if w.Refill > 0 {
		return nil, nil
	}
	var pts []web.Point
	for _, s := range w.slices {
		pts = append(pts, web.Point{At: s.At, Units: s.Units})
	}
	f := w.Forecast
	if f == nil {
		return pts, nil
	}
	wf := &web.Forecast{Rate: f.Rate, Text: f.Text, AtRisk: f.AtRisk}
	wf.Span, _ = time.ParseDuration(f.Span)
	if f.SpentAt != nil && f.AtRisk {
		wf.Spent = *f.SpentAt // spent before its units come back
	}
	return pts, wf
}
