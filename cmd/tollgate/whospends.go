package main

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/web"
	"github.com/tollgate/tollgate/internal/spend"
)

// topSpenders is how many spenders the page shows per bucket.
const topSpenders = 5

// readSpend reads the live who-spends reports of every process
// (internal/spend), of scope only when it is not "", as of now on this
// machine's clock (the writers' clocks, which the records carry).
func readSpend(ctx context.Context, client redis.UniversalClient, prefix, scope string, now time.Time) ([]spend.Report, error) {
	if scope != "" {
		return spend.Read(ctx, client, prefix, scope, now)
	}
	return spend.ReadAll(ctx, client, prefix, now)
}

// whoSpends fills each bucket of p with its top spenders (per process and
// caller, with the endpoint most of their units went to) and the
// requests waiting for room, from the processes' reports, read at now.
func whoSpends(p *web.Page, reports []spend.Report, now time.Time) {
	type bucketKey struct{ scope, bucket string }
	type spenderKey struct {
		bucketKey
		process, caller string
	}
	sums := map[bucketKey]spend.Summary{}
	for _, s := range spend.Summarize(reports) {
		sums[bucketKey{s.Scope, s.Bucket}] = s
	}
	endpoints := map[spenderKey]map[string]int64{}
	spans := map[string]time.Duration{}
	for _, rep := range reports {
		if rep.Format != spend.Format {
			continue
		}
		spans[rep.Scope] = max(spans[rep.Scope], rep.Span)
		for _, e := range rep.Spent {
			k := spenderKey{bucketKey{rep.Scope, e.Bucket}, rep.Process, e.Caller}
			if endpoints[k] == nil {
				endpoints[k] = map[string]int64{}
			}
			endpoints[k][e.Endpoint] += e.Units
		}
	}
	for i := range p.Scopes {
		sc := &p.Scopes[i]
		for j := range sc.Buckets {
			b := &sc.Buckets[j]
			s, ok := sums[bucketKey{sc.Name, b.Name}]
			if !ok {
				continue
			}
			b.Waiting = &web.Waiting{Requests: s.Waiting}
			if s.Waiting > 0 && !s.Since.IsZero() {
				b.Waiting.Oldest = max(0, now.Sub(s.Since).Round(time.Second))
			}
			b.SpendSpan = spans[sc.Name]
			for _, sp := range s.Spenders {
				if sp.Units <= 0 || len(b.Spenders) == topSpenders {
					break // most first: the rest spent less
				}
				name := sp.Process
				if sp.Caller != "" {
					name = sp.Caller + " via " + sp.Process
				}
				b.Spenders = append(b.Spenders, web.Spender{Name: name, Units: sp.Units,
					Endpoint: mostly(endpoints[spenderKey{bucketKey{sc.Name, b.Name}, sp.Process, sp.Caller}])})
			}
		}
	}
}

// mostly is the endpoint most units went to; "" when none was named.
func mostly(units map[string]int64) string {
	var names []string
	for e := range units {
		names = append(names, e)
	}
	if len(names) == 0 {
		return ""
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(units[b], units[a]), strings.Compare(a, b)) })
	return names[0]
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
	wf := &web.Forecast{Rate: f.Rate, Text: f.Text}
	wf.Span, _ = time.ParseDuration(f.Span)
	if f.SpentAt != nil && f.AtRisk {
		wf.Spent = *f.SpentAt // spent before its units come back
	}
	return pts, wf
}
