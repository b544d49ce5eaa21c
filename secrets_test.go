package tollgate_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// TestCredentialsNeverLeak drives a Transport whose scopes come from API
// keys through every outcome, then looks for the keys in every Redis key,
// every hook event, every error and every log line.
func TestCredentialsNeverLeak(t *testing.T) {
	const keyA, keyB = "AIzaSyA-SECRET-KEY-aaaaaaaaaaaaaaaaaaa", "AIzaSyB-SECRET-KEY-bbbbbbbbbbbbbbbbbbb"
	srv, rc := realRedis(t)
	up := newUpstream(t)
	var logs lockedLog // the Transport's listener logs from a goroutine of its own
	var d decisions
	var errs []error
	tr := newTransport(t, tollgate.Config{Transit: -1,
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(150, time.Hour),
		Scope:  tollgate.CredentialScope(func(r *http.Request) string { return r.URL.Query().Get("key") }),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.Refuse}, nil),
		Routes: []tollgate.Route{{Name: "second project", Scope: tollgate.HashCredential(keyB), Rewrite: swapKey(keyB)}},
		Trace:  tollgate.Trace{Decided: d.hook},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	do := func(path string) {
		_, err := get(t, tr, up.URL+path+"?part=snippet&key="+keyA)
		if err != nil {
			errs = append(errs, err)
		}
	}
	do("/v1/items")  // admitted
	do("/v1/search") // admitted: 101 of 150
	do("/v1/search") // fails over to key B's project
	do("/v1/search") // every route spent: a *QuotaError
	up.setRespond(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	do("/v1/items") // the upstream says spent
	up.setRespond(nil)
	do("/v1/unknown") // unknown endpoint

	// Every Redis key, while Redis is up.
	keys, err := rc.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	srv.Kill()
	do("/v1/items") // Redis down, fail closed

	if len(errs) < 4 {
		t.Fatalf("only %d errors: the scenario did not reach every refusal", len(errs))
	}
	if up.count() < 4 {
		t.Fatalf("the upstream saw %d requests; the scenario did not run", up.count())
	}
	var texts []string
	texts = append(texts, keys...)
	for _, ev := range d.list() {
		texts = append(texts, fmt.Sprintf("%+v", ev))
	}
	for _, err := range errs {
		texts = append(texts, err.Error(), fmt.Sprintf("%+v", err))
	}
	texts = append(texts, logs.String())
	for _, s := range texts {
		for _, secret := range []string{keyA, keyB, "SECRET"} {
			if strings.Contains(s, secret) {
				t.Errorf("a credential leaked into %q", s)
			}
		}
	}
	// The route's key really was used, on a copy of the request.
	if !strings.Contains(up.arrivals[2].query, keyB) {
		t.Errorf("the failover route did not send its own key: %q", up.arrivals[2].query)
	}
}

// swapKey rewrites the key= query parameter.
func swapKey(key string) func(*http.Request) {
	return func(r *http.Request) {
		q := r.URL.Query()
		q.Set("key", key)
		r.URL.RawQuery = q.Encode()
	}
}

// lockedLog is a log's bytes, safe for the Transport's goroutines to write
// while the test reads them.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
