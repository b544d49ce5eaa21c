package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/forecast"
	"github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/quota/ops"
)

// A forecastReport is what becomes of a window at the rate it is spent
// now (docs/foresight.md): internal/forecast's figures, for status's text
// and -json, -check and the page.
type forecastReport struct {
	// Rate is the units per second spent now, e.g. 0.23.
	Rate float64 `json:"rate_per_second"`
	// Span is what Rate was measured over in the window's log, e.g.
	// "1h0m0s"; for a token bucket, which keeps no log, "reports": the
	// sum of what the processes report they spent over their spans.
	Span string `json:"span"`
	// RateUnknown: a token bucket no process reports its spending of.
	RateUnknown bool `json:"rate_unknown,omitempty"`
	// SpentAt is when the window would be spent at Rate (its count at the
	// limit; a token bucket empty); absent when it never is.
	SpentAt *time.Time `json:"spent_at,omitempty"`
	// BackAt is when units come back: the reset of a calendar or fixed
	// window, for a sliding one the first instant from SpentAt on at
	// which counted units leave.
	BackAt *time.Time `json:"back_at,omitempty"`
	// FullAt is when a token bucket is full again if nothing more is
	// spent.
	FullAt *time.Time `json:"full_at,omitempty"`
	// AtRisk: at Rate the window is spent before its units come back (a
	// token bucket: the spending outruns the refill). status -check
	// reports these windows.
	AtRisk bool `json:"at_risk"`
	// Before is how long before its units come back the window is spent,
	// e.g. "9h58m"; absent unless AtRisk.
	Before string `json:"before,omitempty"`
	// Text says it in one sentence, instants in the window's zone (a
	// calendar day's) or the command's, e.g. "at this rate, spent at
	// 14:05 PDT, 9h58m before the reset".
	Text string `json:"text"`
}

// forecastWindow forecasts the window s was read of (a window's usage and
// log), in loc.
func forecastWindow(s ops.Series, loc *time.Location) *forecastReport {
	slices := make([]forecast.Slice, len(s.Slices))
	for i, x := range s.Slices {
		slices[i] = forecast.Slice(x)
	}
	f := forecast.Of(s.Usage, slices)
	return &forecastReport{
		Rate: f.Rate, Span: f.Span.String(),
		SpentAt: optional(f.Spent), BackAt: optional(f.Back), AtRisk: f.Early,
		Before: durationIf(f.Early, f.Before()), Text: f.Text(loc),
	}
}

// forecastBucket forecasts a token bucket at the rate the processes
// report they spend it (known false: none reports it).
func forecastBucket(s ops.Series, rate float64, known bool, loc *time.Location) *forecastReport {
	b := forecast.BucketAt(s.Usage, rate)
	r := &forecastReport{Rate: b.Rate, Span: "reports", RateUnknown: !known, FullAt: optional(b.Full), AtRisk: known && b.Outruns}
	if b.Full.Equal(b.Now) {
		r.FullAt = nil
	}
	r.Text = b.Text(loc)
	if !known {
		r.Text += "; the rate of spending is unknown: no process reports what it spends"
		return r
	}
	if b.Outruns {
		r.SpentAt = optional(b.Empty)
		r.Before = durationIf(b.Full.After(b.Empty), b.Full.Sub(b.Empty))
	}
	return r
}

func durationIf(ok bool, d time.Duration) string {
	if !ok || d <= 0 {
		return ""
	}
	return forecast.Duration(d)
}

// bucketRates is what the processes report they spent of each bucket of
// scope: units per second, each report's units over its span, summed over
// the processes. It returns nil when no process reports (the rates are
// unknown).
func bucketRates(reports []spend.Report, scope string) map[string]float64 {
	var rates map[string]float64
	for _, rep := range reports {
		if rep.Scope != scope || rep.Span <= 0 || rep.Format > spend.Format {
			continue
		}
		if rates == nil {
			rates = map[string]float64{}
		}
		for _, e := range rep.Spent {
			rates[e.Bucket] += float64(e.Units) / rep.Span.Seconds()
		}
	}
	return rates
}

// writeForecasts writes a line per window of bk under its table: the
// rate now and what it was measured over, then the forecast's sentence,
// e.g. "    day America/Los_Angeles: 0.23/s over the last 1h0m0s; at this
// rate, spent at 14:05 PDT, 9h58m before the reset".
func writeForecasts(b *strings.Builder, bk bucketReport) {
	for _, w := range bk.Windows {
		f := w.Forecast
		if f == nil {
			continue
		}
		if f.Span == "reports" {
			fmt.Fprintf(b, "    %s: %s\n", w.Window, f.Text)
			continue
		}
		fmt.Fprintf(b, "    %s: %s/s over the last %s; %s\n", w.Window, rateText(f.Rate), f.Span, f.Text)
	}
}

// rateText writes units per second with three significant figures, whole
// units from 100 on, e.g. "0.0231" or "4000".
func rateText(r float64) string {
	if r >= 100 {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(r, 'g', 3, 64)
}
