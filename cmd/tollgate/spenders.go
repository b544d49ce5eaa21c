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
}

type spenderReport struct {
	Process string `json:"process"`
	Caller  string `json:"caller,omitempty"`
	Units   int64  `json:"units"`
}

// addSpending reads what the processes report (of one scope, or of all
// when scope is "") and adds it to the report's buckets.
func addSpending(ctx context.Context, client redis.UniversalClient, prefix, scope string, r *report) error {
	var reports []spend.Report
	var err error
	if scope != "" {
		reports, err = spend.Read(ctx, client, prefix, scope, r.At)
	} else {
		reports, err = spend.ReadAll(ctx, client, prefix, r.At)
	}
	if err != nil {
		return err
	}
	// A record dated later than now by more than its TTL comes from a
	// clock far off (hosts' clocks are taken to agree within a second or
	// so), or is read at an instant given (-clock in tests): left out.
	reports = slices.DeleteFunc(reports, func(rep spend.Report) bool { return rep.At.After(r.At.Add(rep.TTL)) })
	if len(reports) == 0 {
		return nil
	}
	spans := map[string]time.Duration{}
	for _, rep := range reports {
		spans[rep.Scope] = max(spans[rep.Scope], rep.Span)
	}
	sums := map[[2]string]spend.Summary{}
	for _, s := range spend.Summarize(reports) {
		sums[[2]string{s.Scope, s.Bucket}] = s
	}
	for i := range r.Scopes {
		sr := &r.Scopes[i]
		if s, ok := sums[[2]string{sr.Scope, ""}]; ok {
			sr.Spending = spendingOf(s, spans[sr.Scope])
		}
		for j := range sr.Buckets {
			if s, ok := sums[[2]string{sr.Scope, sr.Buckets[j].Bucket}]; ok {
				sr.Buckets[j].Spending = spendingOf(s, spans[sr.Scope])
			}
		}
	}
	return nil
}

func spendingOf(s spend.Summary, span time.Duration) *spendingReport {
	sp := &spendingReport{Span: span.String(), Units: s.Units, Waiting: s.Waiting, Since: optional(s.Since)}
	for i, who := range s.Spenders {
		if i == topSpenders {
			sp.Others = len(s.Spenders) - i
			break
		}
		sp.Spenders = append(sp.Spenders, spenderReport{Process: who.Process, Caller: who.Caller, Units: who.Units})
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
