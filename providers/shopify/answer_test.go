package shopify

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/told"
)

func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"2.0", 2 * time.Second},
		{"2", 2 * time.Second},
		{" 0.5 ", 500 * time.Millisecond},
		{"0", minPause},
		{"", defaultPause},
		{"soon", defaultPause},
		{"-1", defaultPause},
		{"1e9", defaultPause},
		{"NaN", defaultPause},
	} {
		if got := retryAfter(c.in); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestCallLimit(t *testing.T) {
	for _, c := range []struct {
		in         string
		used, size int64
		ok         bool
	}{
		{"32/40", 32, 40, true},
		{"40/40", 40, 40, true},
		{"41/40", 40, 40, true},
		{"1/400", 1, 400, true},
		{"32", 0, 0, false},
		{"x/40", 0, 0, false},
		{"3/0", 0, 0, false},
		{"-1/40", 0, 0, false},
	} {
		used, size, ok := callLimit(c.in)
		if used != c.used || size != c.size || ok != c.ok {
			t.Errorf("callLimit(%q) = %d, %d, %v; want %d, %d, %v", c.in, used, size, ok, c.used, c.size, c.ok)
		}
	}
}

func TestReadAnswer(t *testing.T) {
	for _, c := range []struct {
		name       string
		body       string
		throttled  bool
		size, used int64
		requested  float64
	}{
		{"a query run", `{"data":{},"extensions":{"cost":{"requestedQueryCost":52,"actualQueryCost":12,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":988.0,"restoreRate":50.0}}}}`,
			false, 1000, 12, 52},
		{"throttled", `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":252,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":2000,"currentlyAvailable":100,"restoreRate":100}}}}`,
			true, 2000, 1900, 252},
		{"more available than the maximum", `{"extensions":{"cost":{"requestedQueryCost":1,"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":1200,"restoreRate":50}}}}`,
			false, 1000, 0, 1},
		{"no cost", `{"data":{}}`, false, 0, 0, 0},
		{"not JSON", `<html>`, false, 0, 0, 0},
		{"no bucket", `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":0,"currentlyAvailable":0,"restoreRate":50}}}}`, false, 0, 0, 0},
		{"a negative level", `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":-5,"restoreRate":50}}}}`, false, 0, 0, 0},
		{"huge", `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1e308,"currentlyAvailable":1e308,"restoreRate":1e308}}}}`, false, 1 << 40, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &answer{}
			a.read([]byte(c.body))
			if a.throttled != c.throttled || a.size != c.size || a.used != c.used || a.requested != c.requested {
				t.Errorf("read: throttled %v, %d of %d used, %v requested; want %v, %d of %d, %v",
					a.throttled, a.used, a.size, a.requested, c.throttled, c.used, c.size, c.requested)
			}
		})
	}
}

func TestIsGraphQL(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/admin/api/2025-10/graphql.json", true},
		{"POST", "/admin/api/unstable/graphql.json", true},
		{"POST", "/admin/api/graphql.json", true},
		{"GET", "/admin/api/2025-10/graphql.json", false},
		{"POST", "/admin/api/2025-10/products.json", false},
		{"POST", "/admin/api/a/b/graphql.json", false},
		{"POST", "/admin/graphql.json", false},
		{"POST", "/admin/api//graphql.json", false},
	} {
		req, _ := http.NewRequest(c.method, "https://acme.myshopify.com"+c.path, nil)
		if got := isGraphQL(req); got != c.want {
			t.Errorf("isGraphQL(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// TestTellsTheBucket: what an answer said of its bucket reaches the
// Transport as an announced quota in tollgate's terms (the bucket as
// tollgate enforces it), without what remains when less than a unit does.
func TestTellsTheBucket(t *testing.T) {
	for _, c := range []struct {
		name               string
		body               string
		remaining, used    int64
		resetMin, resetMax time.Duration
	}{
		// 12 of 1,000 used, restored at 50 a second: in 240ms.
		{"a query run", `{"extensions":{"cost":{"requestedQueryCost":52,"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":988,"restoreRate":50}}}}`,
			988, 12, 200 * time.Millisecond, 300 * time.Millisecond},
		// Enforced at 20 seconds of its rate, 200, which is all left.
		{"a slow bucket", `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":900,"restoreRate":10}}}}`,
			200, 0, 0, 10 * time.Millisecond},
		{"less than a point left", `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":0.5,"restoreRate":50}}}}`,
			-1, 1000, period - 100*time.Millisecond, period + 100*time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &answer{}
			a.read([]byte(c.body))
			ctx := told.With(context.Background())
			start := time.Now()
			a.tell(ctx, Points)
			qs := told.Of(ctx)
			if len(qs) != 1 {
				t.Fatalf("told %d quotas, want 1", len(qs))
			}
			q := qs[0]
			// The size is the plan's Transport's, never told as a limit.
			if q.Dialect != dialect || q.Name != Points || q.Limit != -1 || q.Remaining != c.remaining || q.Used != c.used {
				t.Errorf("told %s/%s: %d remaining and %d used of %d; want %s/%s: %d and %d of -1",
					q.Dialect, q.Name, q.Remaining, q.Used, q.Limit, dialect, Points, c.remaining, c.used)
			}
			if in := q.Reset.Sub(start); in < c.resetMin || in > c.resetMax {
				t.Errorf("restored in %v, want between %v and %v", in, c.resetMin, c.resetMax)
			}
		})
	}
	// An answer that said nothing of its bucket tells nothing.
	ctx := told.With(context.Background())
	(&answer{}).tell(ctx, Requests)
	if qs := told.Of(ctx); len(qs) != 0 {
		t.Errorf("an answer without a bucket told %v", qs)
	}
}
