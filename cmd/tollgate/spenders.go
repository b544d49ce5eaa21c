package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/spend"
)

// Who spends: what the Transports write of their spending
// (internal/spend), shown per bucket by status. Absent when no process
// reports.

// topSpenders is how many spenders status shows per bucket.
const topSpenders = 5

// spendingReport is what the processes report of one bucket (or, on a
// scope, of the scope as a whole: the refusals by its pauses).
type spendingReport struct {
	// Span is how far back Units and Refused go, e.g. "1m0s".
	Span string `json:"span"`
	// Units are the units spent in the span, over the processes.
	Units int64 `json:"units"`
	// Spenders are the top spenders, most first; Others how many more
	// there are.
	Spenders []spenderReport `json:"spenders,omitempty"`
	Others   int             `json:"other_spenders,omitempty"`
	// Waiting is how many requests wait now, Since when the oldest began.
	Waiting int        `json:"waiting"`
	Since   *time.Time `json:"oldest_wait_since,omitempty"`
	// Refused counts the refusals of the span by cause ("no-room",
	// "upstream-pause", "operator-pause", "cap", "redis-down"), and the
	// Shadow action's would-be refusals ("would-refuse").
	Refused map[string]int64 `json:"refused,omitempty"`
	span    time.Duration
}

type spenderReport struct {
	Process string `json:"process"`
	Caller  string `json:"caller,omitempty"`
	Units   int64  `json:"units"`
	// Endpoint is where most of its units went, e.g. "search.list".
	Endpoint string `json:"endpoint,omitempty"`
}

// mostly is the endpoint most units went to; "" when none was named.
func mostly(units map[string]int64) string {
	best := ""
	for e, n := range units {
		if best == "" || n > units[best] || n == units[best] && e < best {
			best = e
		}
	}
	return best
}

// readSpending reads what the processes report they spend (of scope, or
// of every scope when scope is ""), as of now. A record dated later than
// now by more than its TTL comes from a clock far off (hosts' clocks are
// taken to agree within a second or so), or is read at an instant given
// (-clock in tests): left out.
func readSpending(ctx context.Context, client redis.UniversalClient, prefix, scope string, now time.Time) ([]spend.Report, error) {
	var reports []spend.Report
	var err error
	if scope != "" {
		reports, err = spend.Read(ctx, client, prefix, scope, now)
	} else {
		reports, err = spend.ReadAll(ctx, client, prefix, now)
	}
	if err != nil {
		return nil, fmt.Errorf("reading what processes report they spend: %w", err)
	}
	return slices.DeleteFunc(reports, func(rep spend.Report) bool { return rep.At.After(now.Add(rep.TTL)) }), nil
}

// spenderKey names one spender of one bucket.
type spenderKey struct{ scope, bucket, process, caller string }

// addSpending adds what the processes report to the report's buckets.
func addSpending(r *report, reports []spend.Report) {
	if len(reports) == 0 {
		return
	}
	spans := map[string]time.Duration{}
	endpoints := map[spenderKey]map[string]int64{}
	for _, rep := range reports {
		spans[rep.Scope] = max(spans[rep.Scope], rep.Span)
		if rep.Format != spend.Format {
			continue
		}
		for _, e := range rep.Spent {
			k := spenderKey{rep.Scope, e.Bucket, rep.Process, e.Caller}
			if endpoints[k] == nil {
				endpoints[k] = map[string]int64{}
			}
			endpoints[k][e.Endpoint] += e.Units
		}
	}
	sums := map[[2]string]spend.Summary{}
	for _, s := range spend.Summarize(reports) {
		sums[[2]string{s.Scope, s.Bucket}] = s
	}
	for i := range r.Scopes {
		sr := &r.Scopes[i]
		if s, ok := sums[[2]string{sr.Scope, ""}]; ok {
			sr.Spending = spendingOf(s, spans[sr.Scope], endpoints)
		}
		for j := range sr.Buckets {
			if s, ok := sums[[2]string{sr.Scope, sr.Buckets[j].Bucket}]; ok {
				sr.Buckets[j].Spending = spendingOf(s, spans[sr.Scope], endpoints)
			}
		}
	}
}

// spendingOf is one bucket's (or scope's) summary as status reports it:
// the top spenders, each with the endpoint most of its units went to.
func spendingOf(s spend.Summary, span time.Duration, endpoints map[spenderKey]map[string]int64) *spendingReport {
	sp := &spendingReport{Span: span.String(), Units: s.Units, Waiting: s.Waiting, Since: optional(s.Since), span: span}
	for i, who := range s.Spenders {
		if i == topSpenders {
			sp.Others = len(s.Spenders) - i
			break
		}
		sp.Spenders = append(sp.Spenders, spenderReport{Process: who.Process, Caller: who.Caller, Units: who.Units,
			Endpoint: mostly(endpoints[spenderKey{s.Scope, s.Bucket, who.Process, who.Caller}])})
	}
	for c, n := range s.Refused {
		if sp.Refused == nil {
			sp.Refused = map[string]int64{}
		}
		sp.Refused[string(c)] += n
	}
	return sp
}

// writeSpending writes a bucket's (or scope's) spending, indented.
func writeSpending(b *strings.Builder, indent string, sp *spendingReport, now time.Time) {
	if sp == nil {
		return
	}
	if sp.Units != 0 || len(sp.Spenders) > 0 {
		who := make([]string, 0, len(sp.Spenders)+1)
		for _, s := range sp.Spenders {
			name := s.Process
			if s.Caller != "" {
				name += " (" + s.Caller + ")"
			}
			who = append(who, fmt.Sprintf("%s %d", name, s.Units))
		}
		if sp.Others > 0 {
			who = append(who, count(sp.Others, "other"))
		}
		fmt.Fprintf(b, "%sspent %d in the last %s: %s\n", indent, sp.Units, sp.Span, strings.Join(who, ", "))
	}
	if sp.Waiting > 0 && sp.Since != nil {
		fmt.Fprintf(b, "%s%s waiting, the oldest for %v\n", indent, count(sp.Waiting, "request"), max(now.Sub(*sp.Since), 0).Round(time.Second))
	}
	var refused []string
	for _, c := range slices.Sorted(maps.Keys(sp.Refused)) {
		if c != string(spend.WouldRefuse) {
			refused = append(refused, fmt.Sprintf("%d %s", sp.Refused[c], c))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(b, "%srefused in the last %s: %s\n", indent, sp.Span, strings.Join(refused, ", "))
	}
	if n := sp.Refused[string(spend.WouldRefuse)]; n > 0 {
		fmt.Fprintf(b, "%sshadow: would have refused %d in the last %s\n", indent, n, sp.Span)
	}
}
