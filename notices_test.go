package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestResumeReachesRememberedRefusals: a process that fails fast
// remembers a pause Redis refused it for, and refuses without asking
// Redis again. Remembering, it listens for what other processes tell: an
// operator's resume, confirmed, is applied before Confirm returns, and
// the next request is sent though the pause had most of a minute to run.
// When nothing is remembered any more, it stops listening.
func TestResumeReachesRememberedRefusals(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Minute),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Decided: d.hook},
	})
	operator := limiterOn(t, rc) // another process's limiter
	ctx := context.Background()
	if _, err := operator.PauseBecause(ctx, tollgate.DefaultScope, "", time.Minute, "maintenance"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := get(t, tr, up.URL+"/v1/items")
		var qe *tollgate.QuotaError
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByOperator || qe.Reason != "maintenance" {
			t.Fatalf("request %d during the pause: %v, want a QuotaError of a pause", i, err)
		}
	}
	if last := d.list()[1]; !last.Cached {
		t.Fatalf("the second refusal asked Redis: %+v; want it from memory", last)
	}
	listening := func() int64 {
		t.Helper()
		n, err := rc.PubSubNumSub(ctx, quota.DefaultPrefix+"control").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[quota.DefaultPrefix+"control"]
	}
	for i := 0; listening() != 1; i++ { // it subscribes off the request's path
		if i == 500 {
			t.Fatal("the process did not listen within 5s of remembering a refusal")
		}
		time.Sleep(10 * time.Millisecond)
	}

	op := ops.New(operator)
	reach, err := op.Confirm(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := op.Resume(ctx, tollgate.DefaultScope, "")
		return err
	})
	if err != nil || reach != (ops.Reach{Listening: 1, Applied: 1}) {
		t.Fatalf("Confirm of the resume: %+v, %v; want 1 of 1", reach, err)
	}
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Fatalf("the request after the resume: %v", err)
	}
	if up.count() != 1 {
		t.Errorf("the upstream got %d requests, want the 1 after the resume", up.count())
	}
	// Nothing remembered now: the subscription ends within a few checks.
	for i := 0; listening() != 0; i++ {
		if i == 500 {
			t.Fatal("the process still listens 5s after it forgot every refusal")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUpstreamPausesSayWhy: a pause an upstream's answer sets keeps, for
// the operators' status, what the upstream answered and to which
// endpoint.
func TestUpstreamPausesSayWhy(t *testing.T) {
	_, rc := realRedis(t)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) })
	tr := newTransport(t, tollgate.Config{
		Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Minute),
		ReadResponse: func(resp *http.Response, _ costs.Endpoint) tollgate.Verdict {
			return tollgate.Verdict{Spent: true, Buckets: []string{"pool"}, Pause: time.Hour, Reason: "quotaExceeded"}
		},
	})
	if _, err := get(t, tr, up.URL+"/v1/items"); !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Fatalf("a 403 the upstream reads as spent: %v", err)
	}
	p, err := lim.PauseOf(context.Background(), tollgate.DefaultScope, "pool")
	if want := "the upstream answered 403 quotaExceeded to items.list"; err != nil || p.Reason != want {
		t.Errorf("the pause: %+v, %v; want the reason %q", p, err, want)
	}
}
