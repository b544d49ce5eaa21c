package tollgateotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// TestCallerAttribute: a request whose context names its caller is
// counted under tollgate.caller; one that names none, without it.
func TestCallerAttribute(t *testing.T) {
	r := newRig(t, tollgate.Config{Buckets: testBuckets(100, time.Hour)})
	ctx := context.Background()
	for range 2 {
		if err := r.get(t, tollgate.WithCaller(ctx, "php-cron"), "/v1/items"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.get(t, ctx, "/v1/items"); err != nil {
		t.Fatal(err)
	}
	want(t, r.points(t), map[string]float64{
		requests + "{tollgate.caller=php-cron,tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}": 2,
		requests + "{tollgate.endpoint=items.list,tollgate.rate_limiting.result=admitted}":                          1,
		charged + "{tollgate.bucket=pool,tollgate.caller=php-cron,tollgate.endpoint=items.list}":                    2,
		charged + "{tollgate.bucket=pool,tollgate.endpoint=items.list}":                                             1,
	})
}
