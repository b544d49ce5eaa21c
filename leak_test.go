package tollgate_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
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
