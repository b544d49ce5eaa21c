package shopify

import (
	"net/http"
	"testing"
	"time"
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
