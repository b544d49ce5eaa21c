package announce_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/announce"
)

// An OpenAI response refusing a request: the requests quota is spent, and
// Retry-After, which takes precedence, holds it longer than its own reset.
func ExampleRead() {
	h := http.Header{}
	h.Set("Retry-After", "20")
	h.Set("X-Ratelimit-Limit-Requests", "60")
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Reset-Requests", "1s")
	h.Set("X-Ratelimit-Limit-Tokens", "150000")
	h.Set("X-Ratelimit-Remaining-Tokens", "149984")
	h.Set("X-Ratelimit-Reset-Tokens", "6m0s")

	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, q := range announce.Read(h, now) {
		fmt.Printf("%s %s: %d of %d %s left until %s\n",
			q.Dialect, q.Name, q.Remaining, q.Limit, q.Unit, q.Reset.Format(time.TimeOnly))
	}
	// Output:
	// openai requests: 0 of 60 requests left until 12:00:20
	// openai tokens: 149984 of 150000 tokens left until 12:06:00
}

// The IETF draft's fields: policies name the quotas and their windows, and
// RateLimit says what remains of them. A policy without a RateLimit member
// has an unknown remainder (-1) and reset (the zero Time).
func ExampleRead_policies() {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	h.Set("RateLimit", `"burst";r=7;t=12`)

	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, q := range announce.Read(h, now) {
		reset := "unknown"
		if !q.Reset.IsZero() {
			reset = q.Reset.Sub(now).String()
		}
		fmt.Printf("%s: %d of %d per %v, reset in %s\n", q.Name, q.Remaining, q.Limit, q.Window, reset)
	}
	// Output:
	// burst: 7 of 100 per 1m0s, reset in 12s
	// daily: -1 of 1000 per 24h0m0s, reset in unknown
}

func ExampleRetryAfter() {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Mon, 01 Jun 2026 12:00:30 GMT", "-1", "Tue, 01 Jun 2027 12:00:01 GMT"} {
		d, ok := announce.RetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
	// 0s false
}
