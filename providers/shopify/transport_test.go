package shopify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/shopsim"
)

const (
	shop  = "acme.myshopify.com"
	token = "shpat_test_token"
)

// rig is a simulated Shopify and a real Redis.
type rig struct {
	sim *shopsim.Server
	api *httptest.Server
	rdb redis.UniversalClient
}

func newRig(t *testing.T, cfg shopsim.Config) *rig {
	t.Helper()
	cfg.Shop = shop
	sim := shopsim.New(cfg)
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	return &rig{sim: sim, api: api, rdb: redistest.Start(t).Client(t)}
}

// transport returns a Transport on the rig's Redis, as one process of a
// fleet builds it.
func (r *rig) transport(t *testing.T, policy tollgate.Policy) *Transport {
	t.Helper()
	tr, err := NewTransport(r.rdb, &Options{Shop: shop,
		Tollgate: tollgate.Config{Policy: func(costs.Endpoint) tollgate.Policy { return policy }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// graphQL sends a query through rt and reads its answer.
func (r *rig) graphQL(ctx context.Context, rt http.RoundTripper, query string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", r.api.URL+"/admin/api/2025-10/graphql.json", strings.NewReader(string(body(query))))
	req.Header.Set("X-Shopify-Access-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// rest sends a REST request through rt.
func (r *rig) rest(ctx context.Context, rt http.RoundTripper) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", r.api.URL+"/admin/api/2025-10/shop.json", nil)
	req.Header.Set("X-Shopify-Access-Token", token)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// productsPage asks for 50 products: 52 points requested.
const productsPage = `query { products(first: 50) { edges { node { id title } } } }`

// bigPage asks for 250 products: 252 points requested.
const bigPage = `query { products(first: 250) { nodes { id } } }`

func TestFleetNeverThrottled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 6 seconds")
	}
	r := newRig(t, shopsim.Config{})
	const processes, workers = 3, 4
	const run = 6 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var refused, failed atomic.Int64
	for range processes {
		tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.WaitTurn})
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					status, err := r.graphQL(ctx, tr, productsPage)
					switch {
					case errors.Is(err, tollgate.ErrQuotaExhausted):
						// Its turn is past the run's end: wait as a worker would.
						refused.Add(1)
						var qe *tollgate.QuotaError
						if errors.As(err, &qe) {
							select {
							case <-ctx.Done():
							case <-time.After(qe.RetryAfter):
							}
						}
					case err != nil && ctx.Err() == nil:
						failed.Add(1)
						t.Errorf("a query failed: %v", err)
					case err == nil && status != http.StatusOK:
						t.Errorf("status %d", status)
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := r.sim.Stats()
	allowed := float64(shopsim.DefaultPoints) + shopsim.DefaultRestore*elapsed.Seconds()
	t.Logf("%d queries, %d points in %v: %.0f%% of the %.0f the bucket allowed; lowest %.0f; %d throttled, %d refused by tollgate",
		st.Queries, st.Points, elapsed.Round(time.Millisecond), 100*float64(st.Points)/allowed, allowed, st.Lowest, st.Throttled, refused.Load())
	if st.Throttled != 0 || st.Lowest < 0 {
		t.Errorf("Shopify throttled %d queries; its bucket fell to %.0f", st.Throttled, st.Lowest)
	}
	if float64(st.Points) < 0.7*allowed {
		t.Errorf("spent %d points of the %.0f the bucket allowed: under 70%%", st.Points, allowed)
	}
}

func TestThrottledIsARefusalForEveryWorker(t *testing.T) {
	r := newRig(t, shopsim.Config{})
	// Another app process spends the bucket on the same token, without
	// tollgate.
	for range 3 {
		if status, err := r.graphQL(context.Background(), http.DefaultTransport, bigPage); err != nil || status != 200 {
			t.Fatalf("outside query: %d, %v", status, err)
		}
	}
	refuse := tollgate.Policy{OnRefusal: tollgate.Refuse}
	a, b := r.transport(t, refuse), r.transport(t, refuse)
	_, err := r.graphQL(context.Background(), a, bigPage)
	var qe *tollgate.QuotaError
	if !errors.Is(err, tollgate.ErrQuotaExhausted) || !errors.As(err, &qe) {
		t.Fatalf("a THROTTLED answer gave %v, want a *tollgate.QuotaError", err)
	}
	if qe.Cause != tollgate.PausedByUpstream || qe.Bucket != Points || qe.RetryAfter <= 0 || qe.RetryAfter > 5*time.Second {
		t.Errorf("QuotaError %+v: want a pause of Points by the upstream, under 5s", qe)
	}
	if st := r.sim.Stats(); st.Throttled != 1 {
		t.Fatalf("Shopify throttled %d queries, want 1", st.Throttled)
	}
	// The other process holds off without asking Shopify.
	if _, err := r.graphQL(context.Background(), b, productsPage); !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("the other process's query: %v, want a refusal", err)
	}
	if st := r.sim.Stats(); st.Throttled != 1 || st.Queries != 3 {
		t.Errorf("Shopify saw %d queries and %d throttled; want 3 and 1", st.Queries, st.Throttled)
	}
}

func TestPlanBucket(t *testing.T) {
	r := newRig(t, shopsim.Config{Points: 2000, Restore: 100})
	tr, err := NewTransport(r.rdb, &Options{Shop: shop, Points: 2000,
		Tollgate: tollgate.Config{Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} }}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// 35 queries of 52 points at once: more than the 1,000 assumed without
	// Options.Points, less than the plan's 2,000.
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 35 {
		wg.Go(func() {
			if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if st := r.sim.Stats(); st.Throttled != 0 || refused.Load() != 0 {
		t.Errorf("%d throttled, %d refused by tollgate, of 35 queries the bucket holds", st.Throttled, refused.Load())
	}
}

func TestLearnsTheBucket(t *testing.T) {
	r := newRig(t, shopsim.Config{Points: 2000, Restore: 100, Requests: 400, Leak: 20})
	tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.Refuse})
	scope := Scope(shop, token)
	for _, c := range []struct {
		bucket string
		send   func() (int, error)
		want   int64
	}{
		{Points, func() (int, error) { return r.graphQL(context.Background(), tr, productsPage) }, 1900},
		{Requests, func() (int, error) { return r.rest(context.Background(), tr) }, 380},
	} {
		if _, err := c.send(); err != nil {
			t.Fatal(err)
		}
		u, err := tr.Usage(context.Background(), scope, c.bucket)
		if err != nil || len(u) == 0 {
			t.Fatalf("Usage: %v, %v", u, err)
		}
		// The size told, less the 5% reserve and a little for Transit.
		if got := u[0].Limit.Units; got < c.want-20 || got > c.want {
			t.Errorf("%s: after an answer telling a bucket of %d, tollgate enforces %d", c.bucket, c.want*100/95, got)
		}
	}
	// 30 queries of 52 points at once: more than the 1,000 assumed.
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 30 {
		wg.Go(func() {
			if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if st := r.sim.Stats(); st.Throttled != 0 || refused.Load() != 0 {
		t.Errorf("%d throttled, %d refused by tollgate, of 30 queries the learned bucket holds", st.Throttled, refused.Load())
	}
}

func TestLearnsASlowBucketAtItsRestoreRate(t *testing.T) {
	// A bucket of 1,000 restored at 10 a second: tollgate's bucket, which
	// restores its size every 20 seconds, is learned at 200.
	r := newRig(t, shopsim.Config{Points: 1000, Restore: 10})
	tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.Refuse})
	if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
		t.Fatal(err)
	}
	u, err := tr.Usage(context.Background(), Scope(shop, token), Points)
	if err != nil || len(u) == 0 {
		t.Fatalf("Usage: %v, %v", u, err)
	}
	if got := u[0].Limit.Units; got > 190 {
		t.Errorf("tollgate enforces %d points of a bucket restoring 200 in 20s", got)
	}
}

func TestReconcilesWithShopify(t *testing.T) {
	r := newRig(t, shopsim.Config{})
	tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.Refuse})
	// Another process spends 756 points without tollgate.
	for range 3 {
		r.graphQL(context.Background(), http.DefaultTransport, bigPage)
	}
	if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
		t.Fatal(err)
	}
	u, err := tr.Usage(context.Background(), Scope(shop, token), Points)
	if err != nil || len(u) == 0 {
		t.Fatalf("Usage: %v, %v", u, err)
	}
	if u[0].Used < 700 {
		t.Errorf("tollgate counts %d points used after Shopify told some 800", u[0].Used)
	}
}

// TestReconcilesThroughTheAnnouncedQuotas: what Shopify's answers tell of
// the points and requests reaches tollgate as its announced quotas do
// (Trace.Reconciled), counting what another program spent on the same
// shop and token, for every worker.
func TestReconcilesThroughTheAnnouncedQuotas(t *testing.T) {
	r := newRig(t, shopsim.Config{})
	var mu sync.Mutex
	outside := map[string]int64{} // by bucket: the most counted as spent elsewhere
	tr, err := NewTransport(r.rdb, &Options{Shop: shop, Tollgate: tollgate.Config{
		Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} },
		Trace: tollgate.Trace{Reconciled: func(_ context.Context, rec tollgate.Reconciliation) {
			if rec.Announced.Dialect != dialect || rec.Scope != Scope(shop, token) {
				t.Errorf("a reconciliation of %s/%s in scope %q", rec.Announced.Dialect, rec.Announced.Name, rec.Scope)
			}
			mu.Lock()
			defer mu.Unlock()
			outside[rec.Bucket] = max(outside[rec.Bucket], rec.Outside)
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// Another program spends 756 points and 20 requests without tollgate.
	for range 3 {
		r.graphQL(context.Background(), http.DefaultTransport, bigPage)
	}
	for range 20 {
		r.rest(context.Background(), http.DefaultTransport)
	}
	if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
		t.Fatal(err)
	}
	if _, err := r.rest(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Some of it restored before the answers were read: at most 50 points
	// and 2 requests a second.
	if outside[Points] < 600 || outside[Requests] < 15 {
		t.Errorf("counted as spent elsewhere: %d points, %d requests; want some 750 and 20", outside[Points], outside[Requests])
	}
	// A second worker's count holds it too.
	other := r.transport(t, tollgate.Policy{OnRefusal: tollgate.Refuse})
	for _, c := range []struct {
		bucket string
		least  int64
	}{{Points, 600}, {Requests, 15}} {
		u, err := other.Usage(context.Background(), Scope(shop, token), c.bucket)
		if err != nil || len(u) == 0 || u[0].Used < c.least {
			t.Errorf("another worker counts %v (%v) of %s, want at least %d used", u, err, c.bucket, c.least)
		}
	}
}

func TestSettlesToTheActualCost(t *testing.T) {
	r := newRig(t, shopsim.Config{Items: 2})
	tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.Refuse})
	if _, err := r.graphQL(context.Background(), tr, productsPage); err != nil {
		t.Fatal(err)
	}
	u, err := tr.Usage(context.Background(), Scope(shop, token), Points)
	if err != nil || len(u) == 0 {
		t.Fatalf("Usage: %v, %v", u, err)
	}
	// Two products returned: 2 + 2*1 = 4 points; the estimate was 52.
	if u[0].Used > 10 {
		t.Errorf("%d points counted after a query whose actual cost is 4", u[0].Used)
	}
}

func TestRESTBucket(t *testing.T) {
	r := newRig(t, shopsim.Config{})
	tr := r.transport(t, tollgate.Policy{OnRefusal: tollgate.WaitTurn})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 44 {
		wg.Go(func() {
			if status, err := r.rest(ctx, tr); err != nil || status != 200 {
				t.Errorf("REST request: %d, %v", status, err)
			}
		})
	}
	wg.Wait()
	if st := r.sim.Stats(); st.REST429 != 0 || st.REST != 44 {
		t.Errorf("Shopify served %d REST requests and answered %d 429s; want 44 and 0", st.REST, st.REST429)
	}
}

func TestREST429PausesForItsRetryAfter(t *testing.T) {
	var calls atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "2.0")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer api.Close()
	tr, err := NewTransport(nil, &Options{Shop: shop, Tollgate: tollgate.Config{Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} }}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := &rig{api: api}
	for range 2 {
		_, err = r.rest(context.Background(), tr)
		var qe *tollgate.QuotaError
		if !errors.As(err, &qe) || qe.Bucket != Requests || qe.RetryAfter < 1500*time.Millisecond || qe.RetryAfter > 2*time.Second {
			t.Fatalf("a 429 with Retry-After 2.0 gave %v (%+v), want a pause of Requests for 2s", err, qe)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("Shopify was asked %d times, want once", calls.Load())
	}
}

func TestNewTransportRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"a scope", Options{Tollgate: tollgate.Config{Scope: tollgate.Scope("x")}}, "Scope is set"},
		{"buckets", Options{Tollgate: tollgate.Config{Buckets: map[string]tollgate.Bucket{}}}, "Options.Tollgate.Buckets"},
		{"a reserve of 100%", Options{ReservePercent: 100}, "ReservePercent"},
		{"a negative MaxBody", Options{MaxBody: -1}, "MaxBody"},
		{"a shop with a slash", Options{Shop: "a/b"}, "Options.Shop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := NewTransport(nil, &c.opts)
			if err == nil {
				tr.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "shopify: ") {
				t.Errorf("NewTransport: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestBadQueryIsNotSent(t *testing.T) {
	r := newRig(t, shopsim.Config{})
	tr := r.transport(t, tollgate.Policy{})
	if _, err := r.graphQL(context.Background(), tr, `{ products(first: 5) { nodes { id }`); err == nil {
		t.Fatal("a query that does not parse was sent")
	}
	if st := r.sim.Stats(); st.Queries+st.Rejected != 0 {
		t.Errorf("Shopify saw %+v", st)
	}
}
