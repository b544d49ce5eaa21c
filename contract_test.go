package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
	"github.com/tollgate/tollgate/quota"
)

// snapshot is what a RoundTripper must leave unchanged in a request.
type snapshot struct {
	method, url, host string
	header            http.Header
	length            int64
	ctx               context.Context
}

func snap(r *http.Request) snapshot {
	return snapshot{r.Method, r.URL.String(), r.Host, r.Header.Clone(), r.ContentLength, r.Context()}
}

// TestBodyClosedOnceOnEveryPath checks the http.RoundTripper contract on
// every way out of RoundTrip: the request body is closed exactly once and
// the request itself is left as it was.
func TestBodyClosedOnceOnEveryPath(t *testing.T) {
	up := newUpstream(t)
	lim := inProcess(t)
	full := func(t *testing.T, scope string) {
		// Spend the pool so that the next upload does not fit.
		_, err := lim.Allow(context.Background(), scope,
			quota.Demand{Bucket: "pool", Units: 60, Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	downClient := limiterOn(t, quickClient(t, "127.0.0.1:1")) // nothing listens there

	var brokenPolicy atomic.Bool // a Config.Policy that turns bad after New checked it
	var cancelWait context.CancelFunc
	cases := []struct {
		name    string
		setup   func(t *testing.T, cfg *tollgate.Config)
		after   func(tr *tollgate.Transport)
		path    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error // nil: a response
	}{
		{name: "sent", path: "/v1/upload"},
		{name: "unknown endpoint", path: "/v1/unknown", wantErr: errAny},
		{name: "refused", path: "/v1/upload", wantErr: tollgate.ErrQuotaExhausted, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.Policy = tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)
			full(t, "refused")
		}},
		{name: "wait beyond MaxWait", path: "/v1/upload", wantErr: tollgate.ErrQuotaExhausted, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.Policy = tollgate.Policies(tollgate.Policy{MaxWait: time.Second}, nil)
			full(t, "wait beyond MaxWait")
		}},
		{name: "cancelled while waiting", path: "/v1/upload", wantErr: context.Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				// A deadline far enough for a hold, cancelled once it waits.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
				cancelWait = cancel
				return ctx, cancel
			},
			setup: func(t *testing.T, cfg *tollgate.Config) {
				cfg.Policy = tollgate.Policies(tollgate.Policy{MaxWait: -1}, nil)
				cfg.Trace.WaitStarted = func(context.Context, tollgate.Decision) { cancelWait() }
				full(t, "cancelled while waiting")
			}},
		{name: "redis down, fail closed", path: "/v1/upload", wantErr: tollgate.ErrUnavailable, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.Limiter = downClient
		}},
		{name: "scope error", path: "/v1/upload", wantErr: errAny, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.Scope = tollgate.CredentialScope(header.Bearer) // no Authorization header
		}},
		{name: "bad configuration", path: "/v1/upload", wantErr: tollgate.ErrConfig, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.Policy = func(costs.Endpoint) tollgate.Policy {
				if brokenPolicy.Load() {
					return tollgate.Policy{OnOutage: tollgate.FailLocal} // with no Local limiter
				}
				return tollgate.Policy{}
			}
		}, after: func(*tollgate.Transport) { brokenPolicy.Store(true) }},
		{name: "upstream spent", path: "/v1/upload", wantErr: tollgate.ErrQuotaExhausted, setup: func(t *testing.T, cfg *tollgate.Config) {
			cfg.ReadResponse = func(*http.Response, costs.Endpoint) tollgate.Verdict {
				return tollgate.Verdict{Spent: true, Pause: time.Second}
			}
		}},
		{name: "closed", path: "/v1/upload", wantErr: tollgate.ErrClosed, after: func(tr *tollgate.Transport) {
			tr.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tollgate.Config{Transit: -1,
				Limiter: lim, Costs: table(t), Buckets: buckets(100, time.Hour),
				Scope: tollgate.Scope(c.name),
			}
			if c.setup != nil {
				c.setup(t, &cfg)
			}
			tr := newTransport(t, cfg)
			if c.after != nil {
				c.after(tr)
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			body := newBody("payload")
			req, err := http.NewRequestWithContext(ctx, "POST", up.URL+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Test", "1")
			before := snap(req)
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("RoundTrip = %v, want a response", err)
			case c.wantErr == errAny && err == nil, c.wantErr != nil && c.wantErr != errAny && !errors.Is(err, c.wantErr):
				t.Fatalf("RoundTrip = %v, want %v", err, c.wantErr)
			}
			if (resp == nil) == (err == nil) {
				t.Errorf("RoundTrip returned response %v and error %v: want exactly one", resp != nil, err)
			}
			// The base transport may close the body on its own goroutine.
			for i := 0; body.closes.Load() == 0 && i < 500; i++ {
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want once", n)
			}
			if after := snap(req); !reflect.DeepEqual(before, after) {
				t.Errorf("RoundTrip changed the request:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// errAny stands for "some error" in the table above.
var errAny = errors.New("any error")

// TestBodyNotReadWhileWaiting checks that a waiting request leaves its body
// alone until its turn: a body may be a stream that cannot be read twice.
func TestBodyNotReadWhileWaiting(t *testing.T) {
	up := newUpstream(t)
	lim := inProcess(t)
	window := 300 * time.Millisecond
	tr := newTransport(t, tollgate.Config{Transit: -1, Limiter: lim, Costs: table(t), Buckets: buckets(100, window)})
	first, err := lim.Allow(context.Background(), tollgate.DefaultScope,
		quota.Demand{Bucket: "pool", Units: 60, Limits: []quota.Limit{quota.PerWindow(100, window)}})
	if err != nil || !first.OK() {
		t.Fatal("could not fill the pool", err)
	}
	body := newBody("payload")
	if _, err := send(t, tr, context.Background(), "POST", up.URL+"/v1/upload", body); err != nil {
		t.Fatal(err)
	}
	due := first.Time().Add(window)
	read := body.first.Load()
	if read == nil {
		t.Fatal("the body was never read")
	}
	if read.Before(due) {
		t.Errorf("body first read at %v, before the request's turn at %v", read.Format(time.StampMicro), due.Format(time.StampMicro))
	}
	if got := up.last().body; got != "payload" {
		t.Errorf("upstream got body %q, want %q", got, "payload")
	}
}

// TestConcurrentRoundTrips uses one Transport from many goroutines (run
// with -race) and checks that the upstream saw exactly what was admitted.
func TestConcurrentRoundTrips(t *testing.T) {
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: inProcess(t), Costs: table(t), Buckets: buckets(300, time.Hour),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
		Trace:  tollgate.Trace{Decided: d.hook},
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				method, path := "GET", "/v1/items"
				if (g+i)%7 == 0 {
					method, path = "POST", "/v1/upload"
				}
				_, err := send(t, tr, context.Background(), method, up.URL+path, nil)
				if err != nil && !errors.Is(err, tollgate.ErrQuotaExhausted) {
					t.Errorf("RoundTrip: %v", err)
				}
			}
		})
	}
	wg.Wait()
	admitted, units := 0, int64(0)
	for _, ev := range d.list() {
		if ev.Admitted {
			admitted++
			for _, ch := range ev.Charges {
				units += ch.Units
			}
		}
	}
	if admitted != up.count() {
		t.Errorf("%d requests admitted but the upstream saw %d", admitted, up.count())
	}
	if units > 300 {
		t.Errorf("%d units admitted under a limit of 300", units)
	}
	if len(d.list()) != 16*20 {
		t.Errorf("%d decisions reported for %d requests", len(d.list()), 16*20)
	}
}
