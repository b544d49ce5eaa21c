package tollgate_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// upstream is an httptest server that records every request it receives.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []arrival
	// respond, when set, writes the response; the default is 200 "ok".
	respond func(w http.ResponseWriter, r *http.Request)
}

type arrival struct {
	at     time.Time
	method string
	path   string
	query  string
	header http.Header
	body   string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.arrivals = append(u.arrivals, arrival{time.Now(), r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		respond := u.respond
		u.mu.Unlock()
		if respond != nil {
			respond(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.arrivals)
}

func (u *upstream) last() arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.arrivals[len(u.arrivals)-1]
}

func (u *upstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.arrivals = nil
}

func (u *upstream) setRespond(f func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.respond = f
}

// table is the cost table of the transport tests: a cheap list call, an
// expensive search that also spends a search bucket, and an upload.
func table(t *testing.T) *costs.Table {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool", "search"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			// Computed charges, which New cannot check against the limits:
			// tests give the pool fewer units than these cost when they
			// send neither.
			{Pattern: "GET /v1/search", Endpoint: "search.list", Func: fixed(costs.Charge{Bucket: "pool", Units: 100}, costs.Charge{Bucket: "search", Units: 1})},
			{Pattern: "POST /v1/upload", Endpoint: "upload", Func: fixed(costs.Charge{Bucket: "pool", Units: 50})},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// fixed is a rule's Func that charges charges.
func fixed(charges ...costs.Charge) func(*http.Request) (costs.Endpoint, error) {
	return func(*http.Request) (costs.Endpoint, error) { return costs.Endpoint{Charges: charges}, nil }
}

// buckets gives the pool units per window and the search bucket 10 per window.
// Tests that also read or fill the limiter directly set Transit: -1 on their
// Transport, so that the windows they touch are the ones it writes.
func buckets(pool int64, window time.Duration) map[string]tollgate.Bucket {
	return map[string]tollgate.Bucket{
		"pool":   {Limits: []quota.Limit{quota.PerWindow(pool, window)}},
		"search": {Limits: []quota.Limit{quota.PerWindow(10, window)}},
	}
}

// realRedis starts a redis-server and returns a client tuned to notice an
// outage quickly: one dial attempt, one retry.
func realRedis(t *testing.T) (*redistest.Server, *redis.Client) {
	t.Helper()
	s := redistest.Start(t)
	return s, quickClient(t, s.Addr)
}

func quickClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, MaxRetries: 1,
		ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// inProcess returns a limiter on an in-process Redis.
func inProcess(t *testing.T) *quota.Limiter {
	t.Helper()
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return limiterOn(t, rdb)
}

// limiterOn returns a limiter on rdb, failing the test on an error.
func limiterOn(t testing.TB, rdb redis.UniversalClient, opts ...quota.Option) *quota.Limiter {
	t.Helper()
	l, err := quota.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newTransport builds a Transport, failing the test on an error, and
// closes it when the test ends.
func newTransport(t testing.TB, cfg tollgate.Config) *tollgate.Transport {
	t.Helper()
	tr, err := tollgate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// get sends a GET through the transport with a background context.
func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	return send(t, tr, context.Background(), "GET", url, nil)
}

func send(t *testing.T, tr http.RoundTripper, ctx context.Context, method, url string, body io.Reader) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// decisions collects the decision hook's events.
type decisions struct {
	mu  sync.Mutex
	all []tollgate.Decision
}

func (d *decisions) hook(_ context.Context, ev tollgate.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, ev)
}

func (d *decisions) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = nil
}

func (d *decisions) list() []tollgate.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]tollgate.Decision(nil), d.all...)
}

// countingBody is a request body that counts its reads and closes.
type countingBody struct {
	r      io.Reader
	reads  atomic.Int32
	closes atomic.Int32
	first  atomic.Pointer[time.Time] // when it was first read
}

func newBody(s string) *countingBody {
	return &countingBody{r: &stringReader{s: s}}
}

type stringReader struct{ s string }

func (r *stringReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.reads.Add(1) == 1 {
		now := time.Now()
		b.first.Store(&now)
	}
	return b.r.Read(p)
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// mode names how a decision was made, for the tests' tallies: "redis",
// "local" (the FailLocal mode), "open" (sent unmetered) or "closed" (not
// sent for want of Redis).
func mode(d tollgate.Decision) string {
	switch {
	case d.Local:
		return "local"
	case d.Unmetered:
		return "open"
	case errors.Is(d.Err, tollgate.ErrUnavailable):
		return "closed"
	}
	return "redis"
}
