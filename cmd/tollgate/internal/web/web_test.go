package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// at is the tests' fixed instant: 12:00 UTC.
var at = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// TestOverTime: with a window's slices the chart draws their running
// total as steps from the window's start to now, the limit and the
// upstream's quota as lines with the reserve between, and the forecast
// from now to the instant the limit is reached.
func TestOverTime(t *testing.T) {
	w := Window{Name: "fixed 1h0m0s", Limit: 900, Quota: 1000, Used: 300,
		Start: at.Add(-30 * time.Minute), End: at.Add(30 * time.Minute),
		Series:   []Point{{at.Add(-10 * time.Minute), 200}, {at.Add(-20 * time.Minute), 100}}, // out of order
		Forecast: &Forecast{Rate: 1, Spent: at.Add(10 * time.Minute)},
	}
	c := drawWindow(w, at)
	if c.H != chartH || len(c.Paths) != 1 {
		t.Fatalf("chart %dx%d with %d paths, want the time chart with 1", c.W, c.H, len(c.Paths))
	}
	// x: 52 + f*496 over the hour; y: 10 + 118 - u/1080*118.
	want := "52,128 134.67,128 134.67,117.07 217.33,117.07 217.33,95.22 300,95.22"
	if c.Paths[0].Points != want {
		t.Errorf("running total %q, want %q", c.Paths[0].Points, want)
	}
	lines := map[string]line{}
	for _, l := range c.Lines {
		lines[strings.TrimSuffix(l.Class, " risk")] = l
	}
	if l := lines["limit"]; l.Y1 != 29.67 || l.Y2 != 29.67 {
		t.Errorf("limit line %+v, want at y 29.67", l)
	}
	if l := lines["quota"]; l.Y1 != 18.74 {
		t.Errorf("quota line %+v, want at y 18.74", l)
	}
	// 300 + 600 s at 1 unit/s reaches the limit, 900, at 12:10.
	if l := lines["forecast"]; l.X1 != 300 || l.Y1 != 95.22 || l.X2 != 382.67 || l.Y2 != 29.67 {
		t.Errorf("forecast line %+v, want from (300,95.22) to (382.67,29.67)", l)
	}
	var spent bool
	for _, x := range c.Texts {
		spent = spent || x.Text == "spent 12:10"
	}
	if !spent {
		t.Errorf("no \"spent 12:10\" label in %+v", c.Texts)
	}

	// No slices: still the time chart, flat at 0 up to now.
	w.Series = nil
	e := drawWindow(w, at)
	if len(e.Paths) != 1 || e.Paths[0].Points != "52,128 300,128" {
		t.Errorf("an empty window's chart: %+v, want the time chart, flat at 0 to now", e.Paths)
	}

	// No span (a token bucket): spent against the limit, as a bar.
	w.Start, w.End = time.Time{}, time.Time{}
	g := drawWindow(w, at)
	if len(g.Paths) != 0 || len(g.Rects) < 2 || g.Rects[1].Class != "used" || g.Rects[1].W != 137.78 {
		t.Errorf("gauge %+v, want a used bar 137.78 wide (300 of 1080 across 496)", g.Rects)
	}
}

// TestChartDrawsWhatHappened: a sliding window of 10s whose log holds
// holds dated after now (requests waiting) draws its running total up to
// now and never past it, nor above what was spent; no forecast line or
// label (its sentence says it); and axis labels to the second.
func TestChartDrawsWhatHappened(t *testing.T) {
	w := Window{Name: "sliding 10s", Limit: 19, Used: 19, Held: 8, Sliding: true,
		Start: at.Add(-10 * time.Second), End: at,
		Series:   []Point{{at.Add(-5 * time.Second), 19}, {at.Add(3 * time.Second), 8}},
		Forecast: &Forecast{Rate: 2, Spent: at.Add(time.Second), AtRisk: true, Text: "spent already"},
	}
	c := drawWindow(w, at)
	if len(c.Paths) != 1 {
		t.Fatalf("%d paths, want the running total", len(c.Paths))
	}
	var nowX float64
	for _, l := range c.Lines {
		if l.Class == "now" {
			nowX = l.X1
		}
		if l.Class == "forecast" {
			t.Errorf("a sliding window's chart draws a forecast line %+v", l)
		}
	}
	for _, pt := range strings.Fields(c.Paths[0].Points) {
		var x, y float64
		if _, err := fmt.Sscanf(pt, "%g,%g", &x, &y); err != nil {
			t.Fatal(err)
		}
		if x > nowX {
			t.Errorf("the running total %q passes now, at x %v", c.Paths[0].Points, nowX)
			break
		}
	}
	var labels []string
	for _, x := range c.Texts {
		if strings.HasPrefix(x.Text, "spent ") {
			t.Errorf("a sliding window's chart is labelled %q", x.Text)
		}
		labels = append(labels, x.Text)
	}
	if !slices.Contains(labels, "11:59:50") || !slices.Contains(labels, "12:00:00 UTC") {
		t.Errorf("the axis says %q, want 11:59:50 to 12:00:00 UTC", labels)
	}
}

// stub is a Control that counts what it is asked.
type stub struct{ pauses, resumes int }

func (s *stub) Pause(context.Context, string, string, time.Duration, string) error {
	s.pauses++
	return nil
}

func (s *stub) Resume(context.Context, string, string) error {
	s.resumes++
	return nil
}

// TestSeams: what the readers to come fill (a window's forecast, the
// waiting requests, the top spenders, the record of operators' actions)
// is shown, escaped; a failed read is shown with status 503; a right
// pause reaches the Recorder with who, what and why.
func TestSeams(t *testing.T) {
	page := &Page{At: at, Prefix: "tollgate:", Scopes: []Scope{{Name: "p", Buckets: []Bucket{{
		Name: "pool",
		Windows: []Window{{Name: "sliding 1m0s", Limit: 100, Used: 40, Remaining: 60,
			Forecast: &Forecast{Rate: 2, Text: "at this rate, spent at 12:00:30 UTC <soon>"}}},
		Waiting:  &Waiting{Requests: 3, Oldest: 1500 * time.Millisecond},
		Spenders: []Spender{{Name: "ingest-7@host1", Units: 30, Endpoint: "search.list"}, {Name: "<i>", Units: 10}},
	}}}}, Actions: []Action{{At: at.Add(-time.Minute), By: "bob", Via: "cli", What: "resume", Scope: "p"}}}
	var failing bool
	ctl := &stub{}
	var recorded []Action
	s, err := New(Options{
		Read: func(context.Context) (*Page, error) {
			if failing {
				return nil, errors.New("redis at x does not answer")
			}
			return page, nil
		},
		Control: ctl, Token: "t",
		Record: func(_ context.Context, a Action) error { recorded = append(recorded, a); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func() (int, string) {
		resp, err := srv.Client().Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get()
	for _, want := range []string{"spent at 12:00:30 UTC &lt;soon&gt;", "3 requests waiting for room, the oldest for 1.5s",
		"<td>ingest-7@host1</td><td>30</td><td>search.list</td>", "<td>&lt;i&gt;</td>", "<td>bob <small>cli</small></td><td>resume scope p</td>"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("status %d; the page lacks %q", code, want)
		}
	}
	failing = true
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "redis at x does not answer") {
		t.Errorf("a failed read: status %d, want 503 with the error shown", code)
	}
	csrf := s.csrf
	form := "csrf=" + csrf + "&token=t&by=carol&scope=p&bucket=pool&for=90s&reason=why+not"
	resp, err := srv.Client().Post(srv.URL+"/pause", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ctl.pauses != 1 || len(recorded) != 1 {
		t.Fatalf("%d pauses, %d recorded; want 1, 1", ctl.pauses, len(recorded))
	}
	if a := recorded[0]; a.By != "carol" || a.What != "pause" || a.Scope != "p" || a.Bucket != "pool" || a.For != 90*time.Second || a.Why != "why not" || !strings.HasPrefix(a.Via, "web 127.0.0.1:") {
		t.Errorf("recorded %+v", a)
	}
}

// TestLoopbackHost: a server on loopback answers to the names of this
// machine only.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:7478": true, "localhost:7478": true, "LOCALHOST.": true, "[::1]:80": true, "::1": true,
		"app.localhost:1": true, "127.0.0.2": true,
		"rebind.example:7478": false, "10.0.0.5:7478": false, "localhost.example": false, "": false, "[::2]:80": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestChartPaceLine: a paced window's chart draws its pace line, from
// the burst at the window's start to the limit at its end; an unpaced
// one draws none.
func TestChartPaceLine(t *testing.T) {
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	w := Window{Name: "day UTC", Limit: 100, Used: 10, Start: start, End: start.Add(24 * time.Hour),
		Series: []Point{{At: start.Add(time.Hour), Units: 10}}, Paced: true, PaceBurst: 10}
	c := drawWindow(w, start.Add(2*time.Hour))
	var pace []line
	limitY := -1.0
	for _, l := range c.Lines {
		switch l.Class {
		case "pace":
			pace = append(pace, l)
		case "limit":
			limitY = l.Y1
		}
	}
	if len(pace) != 1 || pace[0].X1 != padLeft || pace[0].X2 != padLeft+plotW || pace[0].Y2 != limitY || pace[0].Y1 <= pace[0].Y2 {
		t.Fatalf("pace lines %+v; want one from the burst at the start to the limit (y %v) at the end", pace, limitY)
	}
	w.Paced = false
	for _, l := range drawWindow(w, start.Add(2*time.Hour)).Lines {
		if l.Class == "pace" {
			t.Fatal("an unpaced window drew a pace line")
		}
	}
}
