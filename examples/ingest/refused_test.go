package main

import (
	"testing"

	"github.com/tollgate/tollgate"
)

// TestRefusedSaysWhy: a stopped pass says whose refusal it was, and a
// pause's reason.
func TestRefusedSaysWhy(t *testing.T) {
	cases := []struct {
		qe   tollgate.QuotaError
		want string
	}{
		{tollgate.QuotaError{}, "refused: no room left in the shared quota"},
		{tollgate.QuotaError{Cause: tollgate.PausedByOperator, Reason: "incident 7"}, "refused: paused by an operator (incident 7)"},
		{tollgate.QuotaError{Cause: tollgate.PausedByUpstream, Reason: "the upstream answered 403 quotaExceeded to search.list"},
			"refused by the upstream's pause (the upstream answered 403 quotaExceeded to search.list)"},
		{tollgate.QuotaError{Cause: tollgate.CapFull}, "refused: no slot free under its cap on requests in flight"},
		{tollgate.QuotaError{Cause: tollgate.RedisDown}, "refused: Redis down, and this process's local share spent"},
	}
	for _, c := range cases {
		if got := refusedBy(&c.qe); got != c.want {
			t.Errorf("refusedBy(%v) = %q, want %q", c.qe.Cause, got, c.want)
		}
	}
}
