package forecast

import (
	"time"

	"github.com/tollgate/tollgate/quota"
)

// BurnSpans returns the two spans [BurnRate] measures a window of the given
// length over: a twenty-fourth of it (the long span) and a two hundred and
// eighty-eighth (the short one, a twelfth of the long, the ratio of Google's
// SRE workbook). For a day they are the workbook's page alert, an hour and
// five minutes: the long span keeps a passing burst from paging, the short
// one stops the alert soon after the burn stops. For a calendar day, window
// is the day's length.
func BurnSpans(window time.Duration) (long, short time.Duration) {
	return window / 24, window / 288
}

// A Burn is the multiwindow burn-rate check of one window: its forecasts
// at the rates over the long and the short span of [BurnSpans].
type Burn struct {
	// Long is the forecast at the rate over the long span.
	Long Forecast
	// Short is the forecast at the rate over the short span.
	Short Forecast
	// Firing reports that both forecasts are Early: at either rate the
	// window is spent before its units come back.
	Firing bool
}

// BurnRate checks the window of u, whose log is slices, for the burn-rate
// alert of Google's SRE workbook ("Alerting on SLOs", multiwindow,
// multi-burn-rate alerts), where the error budget is the window's units:
// it fires when the rates over both spans of [BurnSpans] would spend the
// units left before they come back. Spans of a calendar or fixed window
// are clipped to the part of it elapsed. A token bucket never fires here
// (see [BucketAt]).
func BurnRate(u quota.Usage, slices []Slice) Burn {
	long, short := BurnSpans(length(u.Limit, u.Now))
	at := func(span time.Duration) Forecast {
		span = measured(u.Limit, u.Now, span)
		f := AtRate(u, slices, Rate(slices, u.Now, span))
		f.Span = span
		return f
	}
	b := Burn{Long: at(long), Short: at(short)}
	b.Firing = b.Long.Early && b.Short.Early
	return b
}
