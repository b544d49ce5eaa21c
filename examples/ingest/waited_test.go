package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// TestWaitedSaysTheWaits: GB waits 10.04s for one turn among 200 calls
// each decided in a millisecond; DE never waits. The line says GB waited
// 10.0s and the table says the same; DE's row says 0.0s: a decision's
// round trip to Redis is no wait.
func TestWaitedSaysTheWaits(t *testing.T) {
	var out bytes.Buffer
	rep := newReport(&out, []string{"GB", "DE"})
	for _, region := range []string{"GB", "DE"} {
		ctx := withRegion(context.Background(), region)
		for range 200 {
			rep.decision(ctx, tollgate.Decision{Endpoint: "videos.list", Admitted: true, Waited: time.Millisecond,
				Charges: nil})
		}
	}
	gb := withRegion(context.Background(), "GB")
	rep.waitEnded(gb, tollgate.Decision{Endpoint: "search.list", Admitted: true, Waited: 10040 * time.Millisecond})
	rep.decision(gb, tollgate.Decision{Endpoint: "search.list", Admitted: true, Waited: 10041 * time.Millisecond})
	rep.table(nil)
	text := out.String()
	if !strings.Contains(text, "[GB] waited 10.0s for its turn: search.list") {
		t.Errorf("no line says GB waited 10.0s:\n%s", text)
	}
	for _, row := range []struct{ region, waited string }{{"GB", "10.0s"}, {"DE", "0.0s"}, {"total", "longest 10.0s"}} {
		found := false
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == row.region {
				found = true
				if !strings.Contains(line, " "+row.waited+" ") {
					t.Errorf("%s's row %q; want it to say it waited %s", row.region, line, row.waited)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s:\n%s", row.region, text)
		}
	}
}
