package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/youtube"
)

// regionKey carries a request's region in its context, for the hook.
type regionKey struct{}

func withRegion(ctx context.Context, region string) context.Context {
	return context.WithValue(ctx, regionKey{}, region)
}

// regionStats is what one region did.
type regionStats struct {
	passes, videos, channels, calls int
	units                           map[string]int64 // admitted, by bucket
	reported                        map[string]int64 // units as of the last pass line
	waited                          time.Duration    // its waits for a turn, summed
	refused                         int              // calls tollgate refused
	upstream                        int              // calls the upstream refused for quota
	failed                          int              // passes that ended on another error
}

// report gathers the regions' progress and prints it.
type report struct {
	mu      sync.Mutex
	out     io.Writer
	start   time.Time
	regions map[string]*regionStats
	order   []string
	// refusedBy counts the calls tollgate refused, by the bucket that had
	// no room: the binding bucket is the one that refused most.
	refusedBy map[string]int
}

func newReport(out io.Writer, regions []string) *report {
	r := &report{out: out, start: time.Now(), regions: map[string]*regionStats{}, order: regions, refusedBy: map[string]int{}}
	for _, name := range regions {
		r.regions[name] = &regionStats{units: map[string]int64{}, reported: map[string]int64{}}
	}
	return r
}

// line writes one progress line, stamped with the time since the start.
// The caller holds r.mu.
func (r *report) line(format string, args ...any) {
	fmt.Fprintf(r.out, "%6.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// waiting is the Transport's wait hook: it tells who waits, for what, and
// until when.
func (r *report) waiting(ctx context.Context, d tollgate.Decision) {
	region, _ := ctx.Value(regionKey{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.regions[region] == nil {
		return
	}
	until := time.Until(d.At)
	if until < 500*time.Millisecond {
		return
	}
	r.line("[%s] waits %.1fs for its turn: %s (until %.1fs)", region, until.Seconds(), d.Endpoint, d.At.Sub(r.start).Seconds())
}

// decision is the Transport's decision hook: it counts units per region,
// and the refusals by bucket.
func (r *report) decision(ctx context.Context, d tollgate.Decision) {
	region, _ := ctx.Value(regionKey{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.regions[region]
	if s == nil {
		return
	}
	if !d.Admitted {
		var qe *tollgate.QuotaError
		if errors.As(d.Err, &qe) && qe.Bucket != "" {
			r.refusedBy[qe.Bucket]++
		}
		return
	}
	for _, ch := range d.Charges {
		s.units[ch.Bucket] += ch.Units
	}
}

// waitEnded is the Transport's hook at the end of a wait for a turn: it
// adds the wait to the region's, and tells of a long one. Only waits for
// a turn count: a decision's round trip to Redis is no wait, and summed
// over a region's calls would show one that never waited as waiting.
func (r *report) waitEnded(ctx context.Context, d tollgate.Decision) {
	region, _ := ctx.Value(regionKey{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.regions[region]
	if s == nil {
		return
	}
	s.waited += d.Waited
	if d.Waited >= 500*time.Millisecond {
		r.line("[%s] waited %.1fs for its turn: %s", region, d.Waited.Seconds(), d.Endpoint)
	}
}

// passDone records a pass and prints its line.
func (r *report) passDone(ctx context.Context, region string, n int, res passResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.regions[region]
	s.videos += res.videos
	s.channels += res.channels
	s.calls += res.calls
	spent := s.spentSinceReport()
	var qe *tollgate.QuotaError
	switch {
	case err == nil:
		s.passes++
		r.line("[%s] pass %d done: %d videos, %d channels in %d calls; spent %s", region, n, res.videos, res.channels, res.calls, spent)
	case stopped(ctx, err):
		r.line("[%s] pass %d cut short: the run is over", region, n)
	case errors.As(err, &qe):
		if qe.Cause == tollgate.PausedByUpstream {
			s.upstream++
		} else {
			s.refused++
		}
		who := refusedBy(qe)
		r.line("[%s] pass %d stopped cleanly: %s %s, quota back in %.1fs; spent %s", region, n, qe.Endpoint, who, qe.RetryAfter.Seconds(), spent)
	default:
		s.failed++
		r.line("[%s] pass %d failed: %v", region, n, err)
	}
}

// unavailable records a pass cut short because Redis could not be reached
// (its calls failed closed), and prints its line.
func (r *report) unavailable(region string, n int, res passResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.regions[region]
	s.videos += res.videos
	s.channels += res.channels
	s.calls += res.calls
	r.line("[%s] pass %d stopped cleanly: Redis unavailable, calls fail closed; again in %v; spent %s", region, n, outageRetry, s.spentSinceReport())
}

// refusedBy says why a pass was refused, e.g. "refused: paused by an
// operator: deploy rollback".
func refusedBy(qe *tollgate.QuotaError) string {
	var who string
	switch qe.Cause {
	case tollgate.PausedByUpstream:
		who = "refused by the upstream's pause"
	case tollgate.PausedByOperator:
		who = "refused: paused by an operator"
	case tollgate.CapFull:
		who = "refused: no slot free under its cap on requests in flight"
	case tollgate.RedisDown:
		who = "refused: Redis down, and this process's local share spent"
	default:
		who = "refused: no room left in the shared quota"
	}
	if qe.Reason != "" {
		who += " (" + qe.Reason + ")"
	}
	return who
}

// spentSinceReport describes the units admitted since the last pass line,
// e.g. "5 pool units, 1 search unit".
func (s *regionStats) spentSinceReport() string {
	var parts []string
	for _, b := range sortedKeys(s.units) {
		if d := s.units[b] - s.reported[b]; d == 1 {
			parts = append(parts, fmt.Sprintf("1 %s unit", b))
		} else if d > 1 {
			parts = append(parts, fmt.Sprintf("%d %s units", d, b))
		}
		s.reported[b] = s.units[b]
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// table prints the final table, one row per region and a total. A
// region's wait is its calls' waits summed (they wait one after another);
// the total's is the longest of the regions': they wait side by side, so
// their sum would say more time than the run took.
func (r *report) table(buckets []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "region\tpasses\tvideos\tchannels\tcalls\t")
	for _, b := range buckets {
		fmt.Fprintf(w, "%s units\t", b)
	}
	fmt.Fprint(w, "waited\trefused\tupstream 403\t\n")
	var total regionStats
	total.units = map[string]int64{}
	for _, name := range r.order {
		s := r.regions[name]
		r.row(w, name, s, buckets, fmt.Sprintf("%.1fs", s.waited.Seconds()))
		total.passes += s.passes
		total.videos += s.videos
		total.channels += s.channels
		total.calls += s.calls
		total.waited = max(total.waited, s.waited)
		total.refused += s.refused
		total.upstream += s.upstream
		total.failed += s.failed
		for b, u := range s.units {
			total.units[b] += u
		}
	}
	r.row(w, "total", &total, buckets, fmt.Sprintf("longest %.1fs", total.waited.Seconds()))
	w.Flush()
}

func (r *report) row(w io.Writer, name string, s *regionStats, buckets []string, waited string) {
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t", name, s.passes, s.videos, s.channels, s.calls)
	for _, b := range buckets {
		fmt.Fprintf(w, "%d\t", s.units[b])
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t\n", waited, s.refused, s.upstream)
}

// totals returns the units admitted per bucket and the failures, over all regions.
func (r *report) totals() (units map[string]int64, upstream, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	units = map[string]int64{}
	for _, s := range r.regions {
		for b, u := range s.units {
			units[b] += u
		}
		upstream += s.upstream
		failed += s.failed
	}
	return units, upstream, failed
}

// binding returns the bucket tollgate refused the most calls for, the
// first of buckets on a tie; "" when it refused none for want of a
// bucket's room.
func (r *report) binding(buckets []string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := ""
	for _, b := range buckets {
		if n := r.refusedBy[b]; n > 0 && (best == "" || n > r.refusedBy[best]) {
			best = b
		}
	}
	return best
}

// sortedKeys returns a map's keys in order.
func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// shares says who got what against their share of the pool: per region,
// its weight's part of the enforced limit per window, and what it spent.
func (r *report) shares(c *config, limit int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum float64
	for _, w := range c.shares {
		sum += w
	}
	windows := int64(1)
	if c.window > 0 {
		windows = max(int64(time.Since(r.start.Truncate(c.window))/c.window)+1, 1)
	}
	parts := make([]string, 0, len(r.order))
	for _, name := range r.order {
		share := float64(limit) * c.shares[name] / sum
		spent := r.regions[name].units[youtube.Pool]
		parts = append(parts, fmt.Sprintf("%s %d of %.0f (%.0f%%)", name, spent, share*float64(windows),
			100*float64(spent)/max(share*float64(windows), 1)))
	}
	return fmt.Sprintf("shares of the pool (%d units a %s after the reserve, over %d windows): %s",
		limit, c.windowName(), windows, strings.Join(parts, ", "))
}
