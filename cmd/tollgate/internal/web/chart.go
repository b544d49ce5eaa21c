package web

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The chart's frame, in SVG user units: the plot lies inside the margins.
const (
	chartW, chartH                     = 560, 150
	padLeft, padRight, padTop, padBott = 52, 12, 10, 22
	plotW, plotH                       = chartW - padLeft - padRight, chartH - padTop - padBott
)

// chart is one window's SVG, as the template draws it: every number is
// computed here, every text escaped by the template.
type chart struct {
	W, H  int
	Title string // the accessible name
	Rects []rect
	Lines []line
	Paths []path
	Texts []text
}

type rect struct {
	X, Y, W, H float64
	Class      string
}

type line struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

type path struct {
	Points string // "x,y x,y ..."
	Class  string
}

type text struct {
	X, Y   float64
	Anchor string // start, middle, end
	Class  string
	Text   string
}

// drawWindow draws w as read at now: over time when it has a span (the
// running total of its slices up to now, an empty window's included, and
// the forecast to exhaustion), else (a token bucket) what is spent
// against the limit as a bar.
func drawWindow(w Window, now time.Time) chart {
	if !w.Start.IsZero() && w.End.After(w.Start) {
		return tidy(overTime(w, now))
	}
	return tidy(gauge(w))
}

// tidy rounds the chart's numbers to what a pixel shows.
func tidy(c chart) chart {
	for i := range c.Rects {
		r := &c.Rects[i]
		r.X, r.Y, r.W, r.H = fnum(r.X), fnum(r.Y), fnum(max(r.W, 0)), fnum(max(r.H, 0))
	}
	for i := range c.Lines {
		l := &c.Lines[i]
		l.X1, l.Y1, l.X2, l.Y2 = fnum(l.X1), fnum(l.Y1), fnum(l.X2), fnum(l.Y2)
	}
	for i := range c.Texts {
		c.Texts[i].X, c.Texts[i].Y = fnum(c.Texts[i].X), fnum(c.Texts[i].Y)
	}
	return c
}

// top is the units the chart's scale reaches: the largest of the numbers
// drawn, with a little room above.
func top(w Window, more ...int64) float64 {
	m := max(w.Limit, w.Quota, w.Used+w.Held, 1)
	for _, v := range more {
		m = max(m, v)
	}
	return float64(m) * 1.08
}

func fnum(f float64) float64 {
	// Two decimals are finer than a pixel and keep the page small.
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 2, 64), 64)
	return v
}

// gauge draws Used (and Held after it, lighter) against Limit and Quota
// as a horizontal bar: what the page shows for a token bucket, or until a
// window's slices are read.
func gauge(w Window) chart {
	scale := top(w)
	x := func(u int64) float64 { return fnum(padLeft + float64(u)/scale*plotW) }
	c := chart{W: chartW, H: 80, Title: fmt.Sprintf("%s: %d of %d units spent", w.Name, w.Used, w.Limit)}
	y0, h := 22.0, 28.0
	c.Rects = append(c.Rects, rect{X: padLeft, Y: y0, W: plotW, H: h, Class: "track"})
	c.Rects = append(c.Rects, rect{X: padLeft, Y: y0, W: x(w.Used) - padLeft, H: h, Class: usedClass(w)})
	if w.Held > 0 {
		c.Rects = append(c.Rects, rect{X: x(w.Used), Y: y0, W: x(w.Used+w.Held) - x(w.Used), H: h, Class: "held"})
	}
	if w.Quota > w.Limit {
		c.Rects = append(c.Rects, rect{X: x(w.Limit), Y: y0 - 6, W: x(w.Quota) - x(w.Limit), H: h + 12, Class: "reserve"})
		c.Lines = append(c.Lines, line{X1: x(w.Quota), Y1: y0 - 6, X2: x(w.Quota), Y2: y0 + h + 6, Class: "quota"})
		c.Texts = append(c.Texts, text{X: x(w.Quota), Y: y0 + h + 18, Anchor: "middle", Class: "lbl", Text: "quota " + strconv.FormatInt(w.Quota, 10)})
	}
	c.Lines = append(c.Lines, line{X1: x(w.Limit), Y1: y0 - 6, X2: x(w.Limit), Y2: y0 + h + 6, Class: "limit"})
	c.Texts = append(c.Texts,
		text{X: padLeft - 6, Y: y0 + h/2 + 4, Anchor: "end", Class: "lbl", Text: "spent"},
		text{X: x(w.Limit), Y: y0 - 8, Anchor: "middle", Class: "lbl", Text: "limit " + strconv.FormatInt(w.Limit, 10)},
	)
	// The count inside the bar when it fits there, else just after it.
	if n := strconv.FormatInt(w.Used, 10); x(w.Used)-padLeft > float64(8*len(n)+10) {
		c.Texts = append(c.Texts, text{X: padLeft + 4, Y: y0 + h/2 + 5, Anchor: "start", Class: "val", Text: n})
	} else {
		c.Texts = append(c.Texts, text{X: x(w.Used) + 4, Y: y0 + h/2 + 5, Anchor: "start", Class: "val out", Text: n})
	}
	return c
}

// usedClass colours what is used by how close it is to the limit.
func usedClass(w Window) string {
	switch {
	case w.Limit > 0 && w.Used >= w.Limit:
		return "used full"
	case w.Limit > 0 && w.Used*100 >= w.Limit*80:
		return "used near"
	}
	return "used"
}

// overTime draws the running total of w's slices from Start to now (never
// past it), the limit and the upstream's quota as lines (the reserve
// between them), now, and, for a calendar day or a fixed window, the
// forecast from now to where the limit is reached (a sliding window's
// chart ends at now: its forecast is its sentence).
func overTime(w Window, now time.Time) chart {
	zone := w.Zone
	if zone == nil {
		zone = time.UTC
	}
	// What happened up to now: slices dated later are holds of requests
	// waiting, not spent; the chart draws nothing past now.
	end := now
	if end.After(w.End) {
		end = w.End
	}
	var pts []Point
	for _, p := range w.Series {
		if !p.At.After(end) {
			pts = append(pts, p)
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
	var total int64
	for _, p := range pts {
		total += p.Units
	}
	scale := top(w, total)
	span := w.End.Sub(w.Start).Seconds()
	x := func(t time.Time) float64 {
		f := t.Sub(w.Start).Seconds() / span
		return fnum(padLeft + min(max(f, 0), 1)*plotW)
	}
	y := func(u float64) float64 { return fnum(padTop + plotH - min(max(u/scale, 0), 1)*plotH) }
	layout := axisLayout(w.End.Sub(w.Start))
	c := chart{W: chartW, H: chartH, Title: fmt.Sprintf("%s: units spent from %s to %s; limit %d", w.Name,
		w.Start.In(zone).Format(layout), w.End.In(zone).Format(layout), w.Limit)}

	base, right := y(0), float64(padLeft+plotW)
	c.Lines = append(c.Lines, line{X1: padLeft, Y1: base, X2: right, Y2: base, Class: "axis"})
	if w.Quota > w.Limit {
		c.Rects = append(c.Rects, rect{X: padLeft, Y: y(float64(w.Quota)), W: plotW, H: y(float64(w.Limit)) - y(float64(w.Quota)), Class: "reserve"})
		c.Lines = append(c.Lines, line{X1: padLeft, Y1: y(float64(w.Quota)), X2: right, Y2: y(float64(w.Quota)), Class: "quota"})
		if y(float64(w.Limit))-y(float64(w.Quota)) >= 10 { // else the labels overlap: the limit's is the one that counts
			c.Texts = append(c.Texts, text{X: padLeft - 4, Y: y(float64(w.Quota)) + 4, Anchor: "end", Class: "lbl", Text: strconv.FormatInt(w.Quota, 10)})
		}
	}
	c.Lines = append(c.Lines, line{X1: padLeft, Y1: y(float64(w.Limit)), X2: right, Y2: y(float64(w.Limit)), Class: "limit"})
	c.Texts = append(c.Texts,
		text{X: padLeft - 4, Y: y(float64(w.Limit)) + 4, Anchor: "end", Class: "lbl", Text: strconv.FormatInt(w.Limit, 10)},
		text{X: padLeft - 4, Y: base + 4, Anchor: "end", Class: "lbl", Text: "0"},
		text{X: padLeft, Y: chartH - 6, Anchor: "start", Class: "lbl", Text: w.Start.In(zone).Format(layout)},
		text{X: right, Y: chartH - 6, Anchor: "end", Class: "lbl", Text: w.End.In(zone).Format(layout + " MST")},
	)

	if w.Paced {
		// What the window may have spent by each instant.
		c.Lines = append(c.Lines, line{X1: padLeft, Y1: y(float64(w.PaceBurst)), X2: right, Y2: y(float64(w.Limit)), Class: "pace"})
		c.Texts = append(c.Texts, text{X: padLeft + 4, Y: y(float64(w.PaceBurst)) - 4, Anchor: "start", Class: "lbl", Text: "pace"})
	}

	// The running total, as steps: flat until a slice, up by its units.
	var b strings.Builder
	fmt.Fprintf(&b, "%v,%v", x(w.Start), base)
	var run float64
	for _, p := range pts {
		fmt.Fprintf(&b, " %v,%v", x(p.At), y(run))
		run += float64(p.Units)
		fmt.Fprintf(&b, " %v,%v", x(p.At), y(run))
	}
	fmt.Fprintf(&b, " %v,%v", x(end), y(run))
	c.Paths = append(c.Paths, path{Points: b.String(), Class: strings.Replace(usedClass(Window{Limit: w.Limit, Used: total}), "used", "run", 1)})
	c.Lines = append(c.Lines, line{X1: x(now), Y1: padTop, X2: x(now), Y2: base, Class: "now"})

	if f := w.Forecast; f != nil && f.Rate > 0 && !w.Sliding && now.Before(w.End) {
		// From now, at the rate, to the limit or to the chart's end.
		from := float64(w.Used)
		to := w.End
		if !f.Spent.IsZero() && f.Spent.Before(to) {
			to = f.Spent
		}
		reach := from + f.Rate*to.Sub(now).Seconds()
		if to.Equal(f.Spent) {
			// A sliding window loses units as it spends: the line
			// ends where the forecast says, at the limit.
			reach = float64(w.Limit)
		}
		class := "forecast" // in the warning colour only when at risk
		if f.AtRisk {
			class = "forecast risk"
		}
		c.Lines = append(c.Lines, line{X1: x(now), Y1: y(from), X2: x(to), Y2: y(reach), Class: class})
		if !f.Spent.IsZero() && !f.Spent.After(w.End) {
			c.Texts = append(c.Texts, text{X: x(to), Y: y(reach) - 6, Anchor: "end", Class: "lbl warn", Text: "spent " + f.Spent.In(zone).Format(layout)})
		}
	}
	return c
}

// axisLayout is how the chart's axis says instants for a span: to the
// second under an hour, so that a 10s window's ends differ, else to the
// minute.
func axisLayout(span time.Duration) string {
	if span < time.Hour {
		return "15:04:05"
	}
	return "15:04"
}
