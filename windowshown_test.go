package tollgate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// TestErrorsShowTheConfiguredWindow: a search (100 units) in a pool of 50
// per hour can never fit. The error names the limit as configured,
// 50/1h0m0s, not as the Transport lengthened it by Transit (50ms by
// default): Transit is tollgate's margin, not the upstream's window.
func TestErrorsShowTheConfiguredWindow(t *testing.T) {
	up := newUpstream(t)
	tr := newTransport(t, tollgate.Config{Limiter: inProcess(t), Costs: table(t), Buckets: buckets(50, time.Hour)})
	_, err := get(t, tr, up.URL+"/v1/search")
	if !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Fatalf("a search of 100 units in a pool of 50: %v; want ErrCostExceedsLimit", err)
	}
	var ce *quota.CostError
	if !errors.As(err, &ce) || ce.Limit.Window != time.Hour {
		t.Errorf("the CostError's limit: %+v; want the window as configured, 1h", ce)
	}
	if msg := err.Error(); !strings.Contains(msg, "50/1h0m0s") || strings.Contains(msg, "0.05s") {
		t.Errorf("the error says %q; want the limit as configured, 50/1h0m0s", msg)
	}
}
