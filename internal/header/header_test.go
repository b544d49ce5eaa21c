package header

import (
	"net/http"
	"testing"
	"time"
)

func TestBearer(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer  xyz ": "xyz", "Basic abc": "", "Bearer": "", "": "",
	} {
		req := &http.Request{Header: http.Header{"Authorization": {in}}}
		if got := Bearer(req); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Fri, 02 Jan 2026 03:05:05 GMT", time.Minute, true},
		{"Fri, 02 Jan 2026 03:00:00 GMT", 0, true}, // in the past
		{"", 0, false},
		{"-5", 0, false},
		{"soon", 0, false},
		{"99999999999999", 0, false},
		{"Wed, 01 Oct 2070 00:00:00 GMT", 0, false}, // decades ahead
		{"Sat, 02 Jan 2027 03:04:05 GMT", 365 * 24 * time.Hour, true},
	}
	for _, c := range cases {
		got, ok := RetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
