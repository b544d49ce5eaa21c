package tollgate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// quotaExceeded reads a YouTube-style 403 quotaExceeded as the pool being
// spent for an hour, the way a provider's UpstreamFunc would.
func quotaExceeded(resp *http.Response, e costs.Endpoint) tollgate.Verdict {
	if resp.StatusCode != http.StatusForbidden {
		return tollgate.DefaultUpstream(resp, e)
	}
	body, _ := tollgate.PeekBody(resp, 4096)
	if !bytes.Contains(body, []byte(`"quotaExceeded"`)) {
		return tollgate.Verdict{}
	}
	return tollgate.Verdict{Spent: true, Buckets: []string{"pool"}, Pause: time.Hour}
}

const quotaExceededBody = `{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your quota.","errors":[{"message":"...","domain":"youtube.quota","reason":"quotaExceeded"}]}}`

// TestUpstreamSpentStopsEveryProcess: after one 403 quotaExceeded, a second
// Transport with its own Limiter (another process) sharing the Redis
// refuses without sending.
func TestUpstreamSpentStopsEveryProcess(t *testing.T) {
	srv, rc := realRedis(t)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, quotaExceededBody)
	})
	one := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(10000, 24*time.Hour),
		Scope: tollgate.Scope("project-a"), ReadResponse: quotaExceeded,
	})
	two := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: limiterOn(t, srv.Client(t)), Costs: table(t), Buckets: buckets(10000, 24*time.Hour),
		Scope: tollgate.Scope("project-a"), ReadResponse: quotaExceeded,
	})

	_, err := get(t, one, up.URL+"/v1/items")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Bucket != "pool" || qe.RetryAfter != time.Hour {
		t.Fatalf("first process: %v, want a *QuotaError from the upstream for bucket pool, 1h", err)
	}
	for _, tr := range []*tollgate.Transport{two, one} {
		_, err = get(t, tr, up.URL+"/v1/items")
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.RetryAfter < 59*time.Minute {
			t.Errorf("after the upstream's 403: %v, want a *QuotaError marked upstream, about 1h", err)
		}
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d requests, want only the first", up.count())
	}
	// Another project is not affected.
	up.setRespond(nil)
	three := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(10000, 24*time.Hour),
		Scope: tollgate.Scope("project-b"), ReadResponse: quotaExceeded,
	})
	if _, err := get(t, three, up.URL+"/v1/items"); err != nil {
		t.Errorf("another project: %v", err)
	}
}

// TestTooManyRequestsPausesTheScope: a 429 with Retry-After pauses the
// scope for everyone, for that long.
func TestTooManyRequestsPausesTheScope(t *testing.T) {
	_, rc := realRedis(t)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(1000, time.Hour),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	_, err := get(t, tr, up.URL+"/v1/items")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.RetryAfter != 30*time.Second || qe.Bucket != "" {
		t.Fatalf("429: %v, want a *QuotaError from the upstream for the scope, 30s", err)
	}
	// Every bucket of the scope waits.
	_, err = get(t, tr, up.URL+"/v1/search")
	if !errors.As(err, &qe) || qe.RetryAfter < 29*time.Second || qe.RetryAfter > 30*time.Second {
		t.Errorf("search after a 429: %v, want refused for about 30s", err)
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d requests, want 1", up.count())
	}
}

// TestOtherResponsesPassThrough: a response that is not a quota signal is
// returned as it is, its body whole, even after the reader peeked at it.
func TestOtherResponsesPassThrough(t *testing.T) {
	up := newUpstream(t)
	const body = `{"error":{"code":403,"errors":[{"reason":"forbidden"}]}}`
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, body)
	})
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: inProcess(t), Costs: table(t), Buckets: buckets(100, time.Hour), ReadResponse: quotaExceeded})
	req, _ := http.NewRequest("GET", up.URL+"/v1/items", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || string(got) != body {
		t.Errorf("got %d %q, want 403 with the body whole", resp.StatusCode, got)
	}
}

func TestPeekBody(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("hello, world"))}
	head, err := tollgate.PeekBody(resp, 5)
	if err != nil || string(head) != "hello" {
		t.Fatalf("PeekBody = %q, %v", head, err)
	}
	all, _ := io.ReadAll(resp.Body)
	if string(all) != "hello, world" {
		t.Errorf("body after PeekBody = %q, want it whole", all)
	}
}

// TestRefundWhenNeverSent: a request whose connection could not even be
// dialled gives its units back; one that reached the upstream does not,
// whatever the status.
func TestRefundWhenNeverSent(t *testing.T) {
	lim := inProcess(t)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(1000, time.Hour)})
	pool := quota.PerWindow(1000, time.Hour)
	used := func() int64 {
		u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", pool)
		if err != nil {
			t.Fatal(err)
		}
		return u.Used
	}

	dead := newUpstream(t)
	dead.Close() // nothing listens at its address now
	if _, err := get(t, tr, dead.URL+"/v1/search"); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	if got := used(); got != 0 {
		t.Errorf("after a failed dial: %d units used, want 0 (refunded)", got)
	}
	resp, err := get(t, tr, up.URL+"/v1/search")
	if err != nil || resp.StatusCode != 500 {
		t.Fatalf("500 upstream: %v", err)
	}
	if got := used(); got != 100 {
		t.Errorf("after a request the upstream answered: %d units used, want 100 (not refunded)", got)
	}
}
