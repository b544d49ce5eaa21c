package provider

import (
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

// kitConfig is a Transport's configuration of one bucket, "b", of 10
// units a minute, and a scope of the request's X-Scope header.
func kitConfig(t *testing.T) tollgate.Config {
	t.Helper()
	ct, err := costs.New(costs.Spec{Buckets: []string{"b"}, Rules: []costs.Rule{{Pattern: "/", Endpoint: "all", Charges: []costs.Charge{{Bucket: "b", Units: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return tollgate.Config{Costs: ct, Scope: func(r *http.Request) (string, error) { return r.Header.Get("X-Scope"), nil },
		Buckets: map[string]tollgate.Bucket{"b": {Limits: []quota.Limit{quota.PerWindow(10, time.Minute)}}}}
}

func TestKit(t *testing.T) {
	k, err := Start("p", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Usage(context.Background(), "s", "b"); err == nil || !strings.HasPrefix(err.Error(), "p: ") {
		t.Errorf("Usage before a Transport is built: %v", err)
	}
	first, err := k.New(kitConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	second, err := k.New(kitConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := k.Record(ctx, "s", "b", 3); err != nil {
		t.Fatal(err)
	}
	if u, err := first.Usage(ctx, "s", "b"); err != nil || u[0].Used != 3 {
		t.Errorf("the first Transport counts %v (%v) after Record, want 3", u, err)
	}
	k.Pick(func(scope string) (*tollgate.Transport, error) {
		if scope == "none" {
			return nil, errors.New("p: no such scope")
		}
		return second, nil
	})
	if err := k.Pause(ctx, "s", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Usage(ctx, "none", "b"); err == nil {
		t.Error("Usage of a scope Pick refuses succeeded")
	}
	if err := k.Fail(errors.New("boom")); err.Error() != "p: boom" {
		t.Errorf("Fail = %q, want the provider's prefix once", err)
	}
	if err := k.Fail(errors.New("p: boom")); err.Error() != "p: boom" {
		t.Errorf("Fail = %q, want the provider's prefix once", err)
	}
	if err := k.Limiter.Ping(ctx, "s"); err == nil {
		t.Error("the in-process Redis still answers after Fail closed the kit")
	}
}

func TestRequestHelpers(t *testing.T) {
	req, _ := http.NewRequest("POST", "http://example.test/x", strings.NewReader("old"))
	out := Replay(context.Background(), req, []byte("new body"))
	for range 2 {
		rc, _ := out.GetBody()
		b, _ := io.ReadAll(rc)
		if string(b) != "new body" || out.ContentLength != 8 {
			t.Fatalf("GetBody gave %q (length %d)", b, out.ContentLength)
		}
	}
	if _, err := ScopeOf(req); err == nil {
		t.Error("ScopeOf a request without a scope succeeded")
	}
	if s, err := ScopeOf(WithScope(req, "pool/model")); err != nil || s != "pool/model" {
		t.Errorf("ScopeOf = %q, %v", s, err)
	}
	for _, c := range []struct {
		pool string
		err  error
		ok   bool
	}{{"org-a", nil, true}, {"", nil, false}, {"a/b", nil, false}, {"x", errors.New("no"), false}} {
		body := &closeCounter{Reader: strings.NewReader("b")}
		r, _ := http.NewRequest("POST", "http://example.test/", body)
		got, err := PoolOf("p", func(*http.Request) (string, error) { return c.pool, c.err }, r)
		if c.ok != (err == nil) || (c.ok && got != c.pool) || (!c.ok && (body.closed != 1 || !strings.HasPrefix(err.Error(), "p: "))) {
			t.Errorf("PoolOf(%q, %v) = %q, %v (body closed %d times)", c.pool, c.err, got, err, body.closed)
		}
	}
}

// closeCounter is a body that counts its closes.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }
