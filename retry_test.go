package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// newRetryClient puts go-retryablehttp above the throttler, so that every
// attempt is charged, with fast backoff for the test.
func newRetryClient(tr http.RoundTripper) *retryablehttp.Client {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: tr}
	rc.CheckRetry = tollgate.CheckRetry(retryablehttp.DefaultRetryPolicy)
	rc.RetryWaitMin, rc.RetryWaitMax, rc.RetryMax = time.Millisecond, 5*time.Millisecond, 4
	rc.Logger = nil
	return rc
}

// TestRetriesAboveTheThrottlerPayPerAttempt: three attempts (two 503s, then
// a 200) are charged three times, as the upstream charges them.
func TestRetriesAboveTheThrottlerPayPerAttempt(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	var n atomic.Int32
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Hour)})
	resp, err := newRetryClient(tr).Get(up.URL + "/v1/search")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || up.count() != 3 {
		t.Fatalf("status %d after %d attempts, want 200 after 3", resp.StatusCode, up.count())
	}
	u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", quota.PerWindow(1000, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 300 {
		t.Errorf("%d units used for three attempts of a 100-unit call, want 300", u.Used)
	}
}

// TestCheckRetryStopsOnQuotaError: a refusal is not retried; the caller
// gets the *QuotaError after one attempt.
func TestCheckRetryStopsOnQuotaError(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: lim, Costs: table(t), Buckets: buckets(150, time.Hour),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Decided: d.hook},
	})
	client := newRetryClient(tr)
	if resp, err := client.Get(up.URL + "/v1/search"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	_, err := client.Get(up.URL + "/v1/search")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) {
		t.Fatalf("second search: %v, want a *QuotaError", err)
	}
	if got := len(d.list()); got != 2 {
		t.Errorf("%d decisions for two calls: the refusal was retried", got)
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d requests, want 1", up.count())
	}
	// Without the wrapper, go-retryablehttp retries the refusal.
	client.CheckRetry = retryablehttp.DefaultRetryPolicy
	d.reset()
	client.Get(up.URL + "/v1/search")
	if got := len(d.list()); got != client.RetryMax+1 {
		t.Errorf("without CheckRetry: %d decisions, want %d: the test cannot tell the wrapper works", got, client.RetryMax+1)
	}
}
