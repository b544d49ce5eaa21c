package tollgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// TestTransportTokenBucket: a bucket limited by a token bucket admits its
// capacity (less what the upstream's refills in Transit) at once, refuses
// the next with the instant a unit is back, and its Usage tells the level,
// the capacity and when the bucket is full again.
func TestTransportTokenBucket(t *testing.T) {
	up := newUpstream(t)
	tr := newTransport(t, tollgate.Config{
		Limiter: inProcess(t), Costs: table(t),
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.TokenBucket(10, 10, 10*time.Second)}},
			"search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}},
		},
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	// DefaultTransit (50ms) refills 0.05 units upstream: one unit less.
	want := quota.TokenBucket(9, 10, 10*time.Second)
	for i := range 9 {
		resp, err := get(t, tr, up.URL+"/v1/items")
		if err != nil {
			t.Fatalf("call %d of the capacity: %v", i+1, err)
		}
		resp.Body.Close()
	}
	_, err := get(t, tr, up.URL+"/v1/items")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.RetryAfter <= 0 || qe.RetryAfter > time.Second {
		t.Fatalf("the call past the capacity: %v, want refused for at most a second", err)
	}
	usage, err := tr.Usage(t.Context(), tollgate.DefaultScope, "pool")
	if err != nil {
		t.Fatal(err)
	}
	u := usage[0]
	if len(usage) != 1 || u.Limit != want || u.Used != 9 || u.Remaining != 0 {
		t.Fatalf("Usage = %+v, want 9 out of %v, none left", usage, want)
	}
	if full := u.Reset.Sub(u.Now); full <= 8*time.Second || full > 9*time.Second {
		t.Errorf("full again in %v, want within 9s (9 units at one a second, less the time since)", full)
	}
}
