package announce_test

import (
	"testing"

	"github.com/tollgate/tollgate/announce"
)

// BenchmarkRead reads typical response headers: GitHub's REST API and
// OpenAI's, with the headers around the quotas that such responses carry
// (their shapes, not any one response's values), and the IETF draft's.
func BenchmarkRead(b *testing.B) {
	cases := []struct {
		name  string
		lines []string
	}{
		{"github", []string{
			`Date: Mon, 01 Jul 2013 17:27:06 GMT`,
			`Content-Type: application/json; charset=utf-8`,
			`Cache-Control: private, max-age=60, s-maxage=60`,
			`Vary: Accept, Authorization, Cookie, X-GitHub-OTP`,
			`ETag: "644b5b0155e6404a9cc4bd9d8b1ae730"`,
			`Last-Modified: Thu, 05 Jul 2012 15:31:30 GMT`,
			`X-GitHub-Media-Type: github.v3; format=json`,
			`x-github-api-version-selected: 2022-11-28`,
			`x-ratelimit-limit: 5000`,
			`x-ratelimit-remaining: 4966`,
			`x-ratelimit-reset: 1372700873`,
			`x-ratelimit-used: 34`,
			`x-ratelimit-resource: core`,
			`Access-Control-Allow-Origin: *`,
			`Strict-Transport-Security: max-age=31536000; includeSubdomains; preload`,
			`X-Frame-Options: deny`,
			`X-Content-Type-Options: nosniff`,
			`Content-Security-Policy: default-src 'none'`,
			`Server: github.com`,
			`X-GitHub-Request-Id: E198:4063:33BD6:375FF:652AAB04`,
		}},
		{"openai", []string{
			`Date: Mon, 01 Jun 2026 12:00:00 GMT`,
			`Content-Type: application/json`,
			`Connection: keep-alive`,
			`openai-organization: org-example`,
			`openai-processing-ms: 412`,
			`openai-version: 2020-10-01`,
			`x-ratelimit-limit-requests: 5000`,
			`x-ratelimit-limit-tokens: 160000`,
			`x-ratelimit-remaining-requests: 4999`,
			`x-ratelimit-remaining-tokens: 159976`,
			`x-ratelimit-reset-requests: 12ms`,
			`x-ratelimit-reset-tokens: 9ms`,
			`x-request-id: req_0123456789abcdef`,
			`Strict-Transport-Security: max-age=31536000; includeSubDomains; preload`,
			`Server: cloudflare`,
		}},
		{"ietf", []string{
			`Content-Type: application/json`,
			`RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400`,
			`RateLimit: "burst";r=60;t=58, "daily";r=420;t=36000`,
		}},
	}
	for _, c := range cases {
		h := header(b, c.lines)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				announce.Read(h, now)
			}
		})
	}
}
