package tollgate_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// tollgateStacks returns the stacks of goroutines running tollgate's own
// code (not its tests) or an in-process Redis (package quota/embedded).
func tollgateStacks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			line = strings.TrimSpace(line)
			own := strings.Contains(line, "/tollgate/") && strings.Contains(line, ".go:") && !strings.Contains(line, "_test.go:")
			if own || strings.Contains(line, "alicebob/miniredis") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func tollgateGoroutines() int { return len(tollgateStacks()) }

// waitNoTollgateGoroutines fails the test if, within two seconds, more such
// goroutines run than before it started.
func waitNoTollgateGoroutines(t *testing.T, before int) {
	t.Helper()
	var stacks []string
	for range 200 {
		if stacks = tollgateStacks(); len(stacks) <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines still run tollgate code (%d before):\n%s", len(stacks), before, strings.Join(stacks, "\n\n"))
}

// TestNoGoroutineOutlivesARoundTrip: once RoundTrip has returned (sent,
// waited, refused, cancelled), the Transport is closed (after its FailLocal
// limiter ran) and the in-process Redis stopped, nothing of tollgate's
// keeps running.
func TestNoGoroutineOutlivesARoundTrip(t *testing.T) {
	before := tollgateGoroutines()
	up := newUpstream(t)
	window := 200 * time.Millisecond
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	localRdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	own, local := limiterOn(t, rdb), limiterOn(t, localRdb)
	down := limiterOn(t, quickClient(t, "127.0.0.1:1"))
	for _, lim := range []*quota.Limiter{own, down} {
		tr := newTransport(t, tollgate.Config{
			Limiter: lim, Costs: table(t), Buckets: buckets(100, window), Local: local, LocalShare: 0.5,
			Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailLocal}, nil),
		})
		for range 3 { // sent, sent, then a wait for the third upload
			if _, err := send(t, tr, context.Background(), "POST", up.URL+"/v1/upload", nil); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		send(t, tr, ctx, "POST", up.URL+"/v1/upload", nil) // refused or cancelled while waiting
		cancel()
		tr.Close()
		tr.CloseIdleConnections()
	}
	rdb.Close()
	localRdb.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	waitNoTollgateGoroutines(t, before)
}

// TestNothingOutlivesABodyOrATransport: the goroutines that keep slots
// alive and wake their waiters end when the last body is closed, or the
// Transport is; a body left open holds its slot until then.
func TestNothingOutlivesABodyOrATransport(t *testing.T) {
	before := tollgateGoroutines()
	_, rc := realRedis(t)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"usage":{"total_tokens":3}}`)) })
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{{Pattern: "GET /v1/chat", Endpoint: "chat", Charges: []costs.Charge{{Bucket: "pool", Units: 10}},
			Settle: []costs.Settle{{Bucket: "pool", Field: "usage.total_tokens"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tollgate.New(tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: tab,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1000, time.Minute)}, InFlight: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", up.URL+"/v1/chat", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b := open(), open() // both slots held by open bodies
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, err := send(t, tr, ctx, "GET", up.URL+"/v1/chat", nil); err == nil {
		t.Error("a third request got a slot while two bodies were open")
	}
	cancel()
	io.Copy(io.Discard, a.Body)
	a.Body.Close() // settles and frees a slot
	c := open()
	c.Body.Close()
	if err := tr.Close(); err != nil { // frees b's slot, though b is still open
		t.Fatal(err)
	}
	n, err := rc.ZCard(context.Background(), "tollgate:{default}:pool:slots").Result()
	if err != nil || n != 0 {
		t.Errorf("%d slots still held after Close (err %v), want 0", n, err)
	}
	b.Body.Close()
	tr.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	waitNoTollgateGoroutines(t, before)
}
