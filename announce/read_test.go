package announce_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/textproto"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/announce"
)

// now is the instant most cases are read at; cases whose samples carry a
// Date, or an epoch reset, are read at an instant near it.
var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// readCase is a response's header lines and the quotas Read must find in
// them, each written by show.
type readCase struct {
	name  string
	at    time.Time // the instant to read at; now when zero
	lines []string  // raw field lines, verbatim from the source unless "constructed"
	want  []string
}

// header builds a header from raw field lines the way a response reaches a
// client: through textproto, which canonicalises names, keeps repeated
// lines, and trims values.
func header(t testing.TB, lines []string) http.Header {
	t.Helper()
	r := textproto.NewReader(bufio.NewReader(strings.NewReader(strings.Join(lines, "\r\n") + "\r\n\r\n")))
	m, err := r.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("header lines %q: %v", lines, err)
	}
	return http.Header(m)
}

// show writes a quota on one line, its reset relative to at.
func show(q announce.Quota, at time.Time) string {
	reset := "none"
	if !q.Reset.IsZero() {
		reset = "+" + q.Reset.Sub(at).String()
	}
	return fmt.Sprintf("%s/%s limit=%d remaining=%d used=%d reset=%s window=%v unit=%s pk=%q",
		q.Dialect, q.Name, q.Limit, q.Remaining, q.Used, reset, q.Window, q.Unit, q.Partition)
}

func checkRead(t *testing.T, cases []readCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := c.at
			if at.IsZero() {
				at = now
			}
			var got []string
			for _, q := range announce.Read(header(t, c.lines), at) {
				got = append(got, show(q, at))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("Read(%q)\ngot:\n\t%s\nwant:\n\t%s", c.lines, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
			}
		})
	}
}

// The documented and observed samples of /work/notes/ratelimits.md,
// verbatim, each with the address it was copied from.
var sampleCases = []readCase{
	// --- IETF draft -09 to -11: RateLimit-Policy and RateLimit ---

	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 3)
	{name: "ietf10/policy-two-windows",
		lines: []string{`RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400`},
		want: []string{
			`ratelimit/burst limit=100 remaining=-1 used=-1 reset=none window=1m0s unit=requests pk=""`,
			`ratelimit/daily limit=1000 remaining=-1 used=-1 reset=none window=24h0m0s unit=requests pk=""`,
		}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 3.2)
	{name: "ietf10/policy-default",
		lines: []string{`RateLimit-Policy: "default";q=100;w=10`},
		want:  []string{`ratelimit/default limit=100 remaining=-1 used=-1 reset=none window=10s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 3.2)
	{name: "ietf10/policy-permin-perhr",
		lines: []string{`RateLimit-Policy: "permin";q=50;w=60,"perhr";q=1000;w=3600`},
		want: []string{
			`ratelimit/permin limit=50 remaining=-1 used=-1 reset=none window=1m0s unit=requests pk=""`,
			`ratelimit/perhr limit=1000 remaining=-1 used=-1 reset=none window=1h0m0s unit=requests pk=""`,
		}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 3.2); pk has non-zero pad bits
	{name: "ietf10/policy-pk-nonzero-padbits",
		lines: []string{`RateLimit-Policy: "peruser";q=100;w=60;pk=:cHsdsRa894==:`},
		want:  []string{`ratelimit/peruser limit=100 remaining=-1 used=-1 reset=none window=1m0s unit=requests pk="p{\x1d\xb1\x16\xbc\xf7"`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 3.2)
	{name: "ietf10/policy-pk-qu-content-bytes",
		lines: []string{`RateLimit-Policy: "peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`},
		want:  []string{`ratelimit/peruser limit=65535 remaining=-1 used=-1 reset=none window=10s unit=content-bytes pk="\xb1\xd7\xe3,\x95\x0eP"`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 4)
	{name: "ietf10/ratelimit-default",
		lines: []string{`RateLimit: "default";r=50;t=30`},
		want:  []string{`ratelimit/default limit=-1 remaining=50 used=-1 reset=+30s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 4.2)
	{name: "ietf10/ratelimit-pk-no-t",
		lines: []string{`RateLimit: "default";r=999;pk=:dHJpYWwxMjEzMjM=:`},
		want:  []string{`ratelimit/default limit=-1 remaining=999 used=-1 reset=none window=0s unit=requests pk="trial121323"`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 4.2)
	{name: "ietf10/ratelimit-300MB",
		lines: []string{`RateLimit: "default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`},
		want:  []string{`ratelimit/default limit=-1 remaining=300000000 used=-1 reset=+1m0s window=0s unit=requests pk="App-999"`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 6)
	{name: "ietf10/redirect-r0",
		lines: []string{`Location: /foo/123`, `RateLimit: "problemPolicy";r=0;t=10`},
		want:  []string{`ratelimit/problemPolicy limit=-1 remaining=0 used=-1 reset=+10s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 7)
	{name: "ietf10/r1-t7",
		lines: []string{`RateLimit: "default";r=1;t=7`},
		want:  []string{`ratelimit/default limit=-1 remaining=1 used=-1 reset=+7s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 8)
	{name: "ietf10/daily-t36400",
		lines: []string{`Date: Tue, 15 Nov 1994 18:00:00 GMT`, `RateLimit: "daily";r=1;t=36400`},
		want:  []string{`ratelimit/daily limit=-1 remaining=1 used=-1 reset=+10h6m40s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/ (section 8)
	{name: "ietf11/daily-t86400",
		lines: []string{`Date: Tue, 15 Nov 1994 18:00:00 GMT`, `RateLimit: "daily";r=1;t=86400`},
		want:  []string{`ratelimit/daily limit=-1 remaining=1 used=-1 reset=+24h0m0s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (section 8)
	{name: "ietf10/somepolicy-ratio",
		lines: []string{`RateLimit-Policy: "somepolicy";q=10000;w=1000`, `RateLimit: "somepolicy";r=10000;t=10`},
		want:  []string{`ratelimit/somepolicy limit=10000 remaining=10000 used=-1 reset=+10s window=16m40s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/200-r0-t50",
		lines: []string{`Content-Type: application/json`, `RateLimit: "default";r=0;t=50`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+50s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/200-r0-t48",
		lines: []string{`Content-Type: application/json`, `RateLimit: "default";r=0;t=48`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+48s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B); names are case-sensitive
	{name: "ietf10/daylimit",
		lines: []string{`Content-Type: application/json`, `RateLimit: "dayLimit";r=100;t=36000`},
		want:  []string{`ratelimit/dayLimit limit=-1 remaining=100 used=-1 reset=+10h0m0s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/basic-60-58",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: "basic";q=100;w=60`, `RateLimit: "basic";r=60;t=58`},
		want:  []string{`ratelimit/basic limit=100 remaining=60 used=-1 reset=+58s window=1m0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/basic-20-56",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: "basic";q=100;w=60`, `RateLimit: "basic";r=20;t=56`},
		want:  []string{`ratelimit/basic limit=100 remaining=20 used=-1 reset=+56s window=1m0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B); read at the Date
	{name: "ietf10/429-retry-after-date",
		at:    time.Date(2019, 8, 5, 9, 27, 0, 0, time.UTC),
		lines: []string{`Content-Type: application/problem+json`, `Date: Mon, 05 Aug 2019 09:27:00 GMT`, `Retry-After: Mon, 05 Aug 2019 09:27:05 GMT`, `RateLimit: "default";r=0;t=5`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+5s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B); RateLimit before its policy
	{name: "ietf10/fixedwindow",
		lines: []string{`Content-Type: application/json`, `RateLimit: "fixedwindow";r=99;t=50`, `RateLimit-Policy: "fixedwindow";q=100;w=60`},
		want:  []string{`ratelimit/fixedwindow limit=100 remaining=99 used=-1 reset=+50s window=1m0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/dynamic-9-50",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: "dynamic";q=100;w=60`, `RateLimit: "dynamic";r=9;t=50`},
		want:  []string{`ratelimit/dynamic limit=100 remaining=9 used=-1 reset=+50s window=1m0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B)
	{name: "ietf10/dynamic-429-pushback",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: "dynamic";q=15;w=20`, `RateLimit: "dynamic";r=0;t=20`},
		want:  []string{`ratelimit/dynamic limit=15 remaining=0 used=-1 reset=+20s window=20s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B): units remain, so
	// Retry-After leaves the quota alone
	{name: "ietf10/dynamic-429-retry-after-20",
		lines: []string{`Content-Type: application/json`, `Retry-After: 20`, `RateLimit-Policy: "dynamic";q=100;w=60`, `RateLimit: "dynamic";r=15;t=40`},
		want:  []string{`ratelimit/dynamic limit=100 remaining=15 used=-1 reset=+40s window=1m0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B); OWS after the comma
	{name: "ietf10/multi-window-ows",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: "hour";q=1000;w=3600, "day";q=5000;w=86400`, `RateLimit: "day";r=100;t=36000`},
		want: []string{
			`ratelimit/hour limit=1000 remaining=-1 used=-1 reset=none window=1h0m0s unit=requests pk=""`,
			`ratelimit/day limit=5000 remaining=100 used=-1 reset=+10h0m0s window=24h0m0s unit=requests pk=""`,
		}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (FAQ); no SP after the colon
	{name: "ietf10/faq-no-space-after-colon",
		lines: []string{`RateLimit:"default";r=50;t=60`},
		want:  []string{`ratelimit/default limit=-1 remaining=50 used=-1 reset=+1m0s window=0s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (FAQ); the policy on two lines,
	// with a vendor parameter
	{name: "ietf10/faq-policy-split-lines",
		lines: []string{`RateLimit-Policy: "sliding";q=100;w=60;burst=1000`, `RateLimit-Policy: "fixed";q=5000;w=3600;burst=0`, `RateLimit: "sliding";r=50;t=44`},
		want: []string{
			`ratelimit/sliding limit=100 remaining=50 used=-1 reset=+44s window=1m0s unit=requests pk=""`,
			`ratelimit/fixed limit=5000 remaining=-1 used=-1 reset=none window=1h0m0s unit=requests pk=""`,
		}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix "RateLimit header
	// fields currently used on the web"); q on RateLimit is a comment
	{name: "ietf10/sliding-q-on-ratelimit",
		lines: []string{`RateLimit-Policy: "sliding";q=12;w=1`, `RateLimit: "sliding";q=12;r=6;t=1`},
		want:  []string{`ratelimit/sliding limit=12 remaining=6 used=-1 reset=+1s window=1s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (same appendix)
	{name: "ietf10/sliding-q-on-ratelimit-r1",
		lines: []string{`RateLimit-Policy: "sliding";q=12;w=1`, `RateLimit: "sliding";q=12;r=1;t=1`},
		want:  []string{`ratelimit/sliding limit=12 remaining=1 used=-1 reset=+1s window=1s unit=requests pk=""`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B, removed in -11):
	// Token names break "MUST be a String", and RateLimit lacks r
	{name: "ietf10/NEG-token-name-no-r",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: quota;q=100;w=1`, `RateLimit: quota;t=1`}},
	// https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt (appendix B, removed in -11)
	{name: "ietf10/NEG-token-name-no-w",
		lines: []string{`Content-Type: application/json`, `RateLimit-Policy: quota;q=10`, `RateLimit: quota;t=1`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-07: RateLimit as a Dictionary
	// fails as a List; the Integer policy is no String
	{name: "ietf07/NEG-dictionary-form",
		lines: []string{`RateLimit-Policy: 100;w=10`, `RateLimit: limit=100, remaining=50, reset=5`}},

	// --- IETF draft -00 to -06: RateLimit-Limit, -Remaining, -Reset ---

	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06
	{name: "ietf06/trio-10-1-7",
		lines: []string{`RateLimit-Limit: 10`, `RateLimit-Remaining: 1`, `RateLimit-Reset: 7`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=1 used=-1 reset=+7s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06
	{name: "ietf06/trio-redirect",
		lines: []string{`Location: /foo/123`, `RateLimit-Remaining: 0`, `RateLimit-Limit: 10`, `RateLimit-Reset: 10`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=0 used=-1 reset=+10s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06; mixed-case names
	{name: "ietf06/trio-mixed-case",
		lines: []string{`Content-Type: application/json`, `RateLimit-Limit: 100`, `Ratelimit-Remaining: 0`, `Ratelimit-Reset: 50`},
		want:  []string{`ratelimit-trio/default limit=100 remaining=0 used=-1 reset=+50s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06; read at the Date
	{name: "ietf06/trio-429-retry-after-date",
		at:    time.Date(2019, 8, 5, 9, 27, 0, 0, time.UTC),
		lines: []string{`Content-Type: application/json`, `Date: Mon, 05 Aug 2019 09:27:00 GMT`, `Retry-After: Mon, 05 Aug 2019 09:27:05 GMT`, `RateLimit-Reset: 5`, `RateLimit-Limit: 100`, `Ratelimit-Remaining: 0`},
		want:  []string{`ratelimit-trio/default limit=100 remaining=0 used=-1 reset=+5s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06; the same read 3s late: the
	// reset is 5s after the response, Retry-After's date 2s after the reading
	{name: "ietf06/trio-429-retry-after-date-read-late",
		at:    time.Date(2019, 8, 5, 9, 27, 3, 0, time.UTC),
		lines: []string{`Content-Type: application/json`, `Date: Mon, 05 Aug 2019 09:27:00 GMT`, `Retry-After: Mon, 05 Aug 2019 09:27:05 GMT`, `RateLimit-Reset: 5`, `RateLimit-Limit: 100`, `Ratelimit-Remaining: 0`},
		want:  []string{`ratelimit-trio/default limit=100 remaining=0 used=-1 reset=+5s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06; the -06 Integer policy gives the window
	{name: "ietf06/trio-with-policy",
		lines: []string{`Content-Type: application/json`, `RateLimit-Limit: 100`, `RateLimit-Policy: 100;w=60`, `Ratelimit-Remaining: 99`, `Ratelimit-Reset: 50`},
		want:  []string{`ratelimit-trio/default limit=100 remaining=99 used=-1 reset=+50s window=1m0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06
	{name: "ietf06/trio-policy-ratio",
		lines: []string{`RateLimit-Limit: 10000`, `RateLimit-Policy: 10000;w=1000`, `RateLimit-Remaining: 10000`, `RateLimit-Reset: 10`},
		want:  []string{`ratelimit-trio/default limit=10000 remaining=10000 used=-1 reset=+10s window=16m40s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06; vendor fields are not read
	{name: "ietf06/trio-custom-fields",
		lines: []string{`Content-Type: application/json`, `acme-RateLimit-DayLimit: 5000`, `acme-RateLimit-HourLimit: 1000`, `RateLimit-Limit: 5000`, `RateLimit-Remaining: 100`, `RateLimit-Reset: 36000`},
		want:  []string{`ratelimit-trio/default limit=5000 remaining=100 used=-1 reset=+10h0m0s window=0s unit=requests pk=""`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06: a reset alone announces no quota
	{name: "ietf06/reset-alone",
		lines: []string{`Date: Tue, 15 Nov 1994 08:00:00 GMT`, `RateLimit-Reset: 36000`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06: policies alone name no quota
	{name: "ietf06/policy-multi-split",
		lines: []string{`RateLimit-Policy: 10;w=1, 50;w=60, 1000;w=3600, 5000;w=86400`, `RateLimit-Policy: 10;w=1;burst=1000, 1000;w=3600`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06 ("invalid header field value")
	{name: "ietf06/NEG-policy-duplicate-units",
		lines: []string{`RateLimit-Policy: 10;w=1, 10;w=60`}},
	// https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-01: the limit carries its policies
	{name: "ietf01/limit-carries-policy",
		lines: []string{`RateLimit-Limit: 10, 10;w=1, 50;w=60, 1000;w=3600, 5000;w=86400`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=-1 used=-1 reset=none window=1s unit=requests pk=""`}},

	// --- GitHub ---

	// https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md;
	// no Date: read at the next sample's
	{name: "github/rest-200-unauth",
		at:    time.Date(2013, 7, 1, 17, 27, 6, 0, time.UTC),
		lines: []string{`x-ratelimit-limit: 60`, `x-ratelimit-remaining: 56`, `x-ratelimit-used: 4`, `x-ratelimit-reset: 1372700873`},
		want:  []string{`github/core limit=60 remaining=56 used=4 reset=+20m47s window=0s unit=requests pk=""`}},
	// https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md
	{name: "github/rest-200-oauth-app",
		at:    time.Date(2013, 7, 1, 17, 27, 6, 0, time.UTC),
		lines: []string{`Date: Mon, 01 Jul 2013 17:27:06 GMT`, `x-ratelimit-limit: 5000`, `x-ratelimit-remaining: 4966`, `x-ratelimit-used: 34`, `x-ratelimit-reset: 1372700873`},
		want:  []string{`github/core limit=5000 remaining=4966 used=34 reset=+20m47s window=0s unit=requests pk=""`}},
	// https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md;
	// the conditional request's sample has no x-ratelimit-used
	{name: "github/rest-200-conditional",
		at:    time.Date(2013, 7, 1, 17, 27, 6, 0, time.UTC),
		lines: []string{`Cache-Control: private, max-age=60`, `ETag: "644b5b0155e6404a9cc4bd9d8b1ae730"`, `Last-Modified: Thu, 05 Jul 2012 15:31:30 GMT`, `Vary: Accept, Authorization, Cookie`, `x-ratelimit-limit: 5000`, `x-ratelimit-remaining: 4996`, `x-ratelimit-reset: 1372700873`},
		want:  []string{`github/core limit=5000 remaining=4996 used=-1 reset=+20m47s window=0s unit=requests pk=""`}},
	// https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md
	{name: "github/rest-403-primary",
		at:    time.Date(2013, 8, 20, 14, 50, 41, 0, time.UTC),
		lines: []string{`Date: Tue, 20 Aug 2013 14:50:41 GMT`, `x-ratelimit-limit: 60`, `x-ratelimit-remaining: 0`, `x-ratelimit-used: 60`, `x-ratelimit-reset: 1377013266`},
		want:  []string{`github/core limit=60 remaining=0 used=60 reset=+50m25s window=0s unit=requests pk=""`}},
	// https://github.com/github/docs/blob/015d8c38bacc76ad8b57b9ad65c9616ec9a238ea/content/rest/overview/resources-in-the-rest-api.md:
	// a secondary limit announces no quota
	{name: "github/rest-403-secondary-doc",
		lines: []string{`Content-Type: application/json; charset=utf-8`, `Connection: close`}},

	// --- X ---

	// https://docs.x.com/fundamentals/rate-limits; read ten minutes before the reset
	{name: "x/doc-headers",
		at:    time.Date(2024, 1, 16, 15, 50, 0, 0, time.UTC),
		lines: []string{`x-rate-limit-limit: 900`, `x-rate-limit-remaining: 847`, `x-rate-limit-reset: 1705420800`},
		want:  []string{`x/default limit=900 remaining=847 used=-1 reset=+10m0s window=0s unit=requests pk=""`}},

	// --- OpenAI ---

	// https://developers.openai.com/api/docs/guides/rate-limits
	{name: "openai/doc-table-classic",
		lines: []string{`x-ratelimit-limit-requests: 60`, `x-ratelimit-limit-tokens: 150000`, `x-ratelimit-remaining-requests: 59`, `x-ratelimit-remaining-tokens: 149984`, `x-ratelimit-reset-requests: 1s`, `x-ratelimit-reset-tokens: 6m0s`},
		want: []string{
			`openai/requests limit=60 remaining=59 used=-1 reset=+1s window=0s unit=requests pk=""`,
			`openai/tokens limit=150000 remaining=149984 used=-1 reset=+6m0s window=0s unit=tokens pk=""`,
		}},
	// https://developers.openai.com/api/docs/guides/rate-limits (the 2026-06 table)
	{name: "openai/doc-table-2026-project",
		lines: []string{`Retry-After: 56`, `x-ratelimit-limit-project-tokens: 60000`, `x-ratelimit-remaining-project-tokens: 57000`, `x-ratelimit-reset-project-tokens: 3s`},
		want:  []string{`openai/project-tokens limit=60000 remaining=57000 used=-1 reset=+3s window=0s unit=tokens pk=""`}},
	// https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905 (observed)
	{name: "openai/OBS-usage-based-ms",
		lines: []string{`x-ratelimit-limit-requests: 5000`, `x-ratelimit-limit-tokens: 160000`, `x-ratelimit-limit-tokens_usage_based: 160000`, `x-ratelimit-remaining-requests: 4999`, `x-ratelimit-remaining-tokens: 159976`, `x-ratelimit-remaining-tokens_usage_based: 159976`, `x-ratelimit-reset-requests: 12ms`, `x-ratelimit-reset-tokens: 9ms`, `x-ratelimit-reset-tokens_usage_based: 9ms`},
		want: []string{
			`openai/requests limit=5000 remaining=4999 used=-1 reset=+12ms window=0s unit=requests pk=""`,
			`openai/tokens limit=160000 remaining=159976 used=-1 reset=+9ms window=0s unit=tokens pk=""`,
			`openai/tokens_usage_based limit=160000 remaining=159976 used=-1 reset=+9ms window=0s unit=tokens pk=""`,
		}},
	// https://github.com/openai/openai-dotnet/issues/838 (observed, Azure OpenAI): -1 means unknown
	{name: "openai/OBS-azure-sentinels",
		lines: []string{`x-ratelimit-limit-tokens: -1`, `x-ratelimit-remaining-tokens: -1`, `x-ratelimit-reset-tokens: 0`}},

	// --- Anthropic ---

	// https://docs.anthropic.com/en/api/rate-limits, "Response headers"
	// (constructed from its table): resets are RFC 3339 instants, token
	// remainders rounded to thousands; "tokens" is the most restrictive.
	{name: "anthropic/doc-table-constructed",
		lines: []string{`anthropic-ratelimit-requests-limit: 50`, `anthropic-ratelimit-requests-remaining: 49`, `anthropic-ratelimit-requests-reset: 2026-06-01T12:00:02Z`,
			`anthropic-ratelimit-input-tokens-limit: 30000`, `anthropic-ratelimit-input-tokens-remaining: 29000`, `anthropic-ratelimit-input-tokens-reset: 2026-06-01T12:00:01.5Z`,
			`anthropic-ratelimit-output-tokens-limit: 8000`, `anthropic-ratelimit-output-tokens-remaining: 5000`, `anthropic-ratelimit-output-tokens-reset: 2026-06-01T14:00:20+02:00`,
			`anthropic-ratelimit-tokens-limit: 8000`, `anthropic-ratelimit-tokens-remaining: 5000`, `anthropic-ratelimit-tokens-reset: 2026-06-01T11:59:59Z`},
		want: []string{
			`anthropic/requests limit=50 remaining=49 used=-1 reset=+2s window=0s unit=requests pk=""`,
			`anthropic/input-tokens limit=30000 remaining=29000 used=-1 reset=+1.5s window=0s unit=tokens pk=""`,
			`anthropic/output-tokens limit=8000 remaining=5000 used=-1 reset=+20s window=0s unit=tokens pk=""`,
			`anthropic/tokens limit=8000 remaining=5000 used=-1 reset=+0s window=0s unit=tokens pk=""`,
		}},
	// https://rdrr.io/cran/tidyllm/src/tests/testthat/claude/api.anthropic.com/v1/messages-e050b5-POST.R (observed)
	{name: "anthropic/OBS-200-headers",
		at: time.Date(2025, 8, 21, 12, 41, 0, 0, time.UTC),
		lines: []string{`date: Thu, 21 Aug 2025 12:41:00 GMT`,
			`anthropic-ratelimit-input-tokens-limit: 80000`, `anthropic-ratelimit-input-tokens-remaining: 80000`, `anthropic-ratelimit-input-tokens-reset: 2025-08-21T12:40:59Z`,
			`anthropic-ratelimit-requests-limit: 1000`, `anthropic-ratelimit-requests-remaining: 999`, `anthropic-ratelimit-requests-reset: 2025-08-21T12:40:59Z`,
			`anthropic-ratelimit-tokens-limit: 96000`, `anthropic-ratelimit-tokens-remaining: 96000`, `anthropic-ratelimit-tokens-reset: 2025-08-21T12:40:59Z`},
		want: []string{
			`anthropic/requests limit=1000 remaining=999 used=-1 reset=+0s window=0s unit=requests pk=""`,
			`anthropic/input-tokens limit=80000 remaining=80000 used=-1 reset=+0s window=0s unit=tokens pk=""`,
			`anthropic/tokens limit=96000 remaining=96000 used=-1 reset=+0s window=0s unit=tokens pk=""`,
		}},
	// constructed: a 429 whose retry-after is later than the reset; a
	// reset that is not RFC 3339 is not announced
	{name: "anthropic/429-constructed",
		lines: []string{`retry-after: 30`, `anthropic-ratelimit-output-tokens-limit: 8000`, `anthropic-ratelimit-output-tokens-remaining: 0`, `anthropic-ratelimit-output-tokens-reset: 2026-06-01T12:00:20Z`,
			`anthropic-ratelimit-requests-limit: 50`, `anthropic-ratelimit-requests-remaining: 10`, `anthropic-ratelimit-requests-reset: 20s`},
		want: []string{
			`anthropic/requests limit=50 remaining=10 used=-1 reset=none window=0s unit=requests pk=""`,
			`anthropic/output-tokens limit=8000 remaining=0 used=-1 reset=+30s window=0s unit=tokens pk=""`,
		}},

	// --- not a dialect Read knows ---
}

func TestReadSamples(t *testing.T) { checkRead(t, sampleCases) }

// Cases built from the samples above and from the rules they follow, each
// citing the rule; "constructed" marks lines that no source shows.
var ruleCases = []readCase{
	// --- Retry-After against the resets ---

	// constructed; https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt section 7:
	// "the Retry-After field MUST take precedence"
	{name: "retry-after/later-than-t",
		lines: []string{`Retry-After: 30`, `RateLimit: "default";r=0;t=5`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+30s window=0s unit=requests pk=""`}},
	// constructed; same section: a t later than Retry-After is kept (Read only makes its caller more careful)
	{name: "retry-after/earlier-than-t",
		lines: []string{`Retry-After: 20`, `RateLimit-Policy: "dynamic";q=15;w=20`, `RateLimit: "dynamic";r=0;t=40`},
		want:  []string{`ratelimit/dynamic limit=15 remaining=0 used=-1 reset=+40s window=20s unit=requests pk=""`}},
	// constructed; same section: an exhausted quota with no t resets at Retry-After
	{name: "retry-after/no-t",
		lines: []string{`Retry-After: 20`, `RateLimit: "default";r=0`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+20s window=0s unit=requests pk=""`}},
	// constructed; https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit:
	// a secondary limit's retry-after does not cut the primary's reset short; OpenAI's exhausted
	// requests wait for it (https://developers.openai.com/api/docs/guides/rate-limits)
	{name: "retry-after/across-dialects",
		at:    time.Date(2013, 8, 20, 14, 50, 41, 0, time.UTC),
		lines: []string{`Retry-After: 60`, `x-ratelimit-limit: 60`, `x-ratelimit-remaining: 0`, `x-ratelimit-used: 60`, `x-ratelimit-reset: 1377013266`, `x-ratelimit-limit-requests: 60`, `x-ratelimit-remaining-requests: 0`, `x-ratelimit-reset-requests: 1s`, `x-ratelimit-limit-tokens: 150000`, `x-ratelimit-remaining-tokens: 149984`, `x-ratelimit-reset-tokens: 6m0s`},
		want: []string{
			`github/core limit=60 remaining=0 used=60 reset=+50m25s window=0s unit=requests pk=""`,
			`openai/requests limit=60 remaining=0 used=-1 reset=+1m0s window=0s unit=requests pk=""`,
			`openai/tokens limit=150000 remaining=149984 used=-1 reset=+6m0s window=0s unit=tokens pk=""`,
		}},
	// constructed; https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3: an unusable Retry-After is ignored
	{name: "retry-after/unusable",
		lines: []string{`Retry-After: soon`, `RateLimit: "default";r=0;t=5`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+5s window=0s unit=requests pk=""`}},
	// constructed; Retry-After is a singleton field: lines that disagree are ignored
	{name: "retry-after/lines-disagree",
		lines: []string{`Retry-After: 30`, `Retry-After: 60`, `RateLimit: "default";r=0;t=5`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+5s window=0s unit=requests pk=""`}},
	// constructed; lines that agree are read
	{name: "retry-after/lines-agree",
		lines: []string{`Retry-After: 30`, `Retry-After: 30`, `RateLimit: "default";r=0;t=5`},
		want:  []string{`ratelimit/default limit=-1 remaining=0 used=-1 reset=+30s window=0s unit=requests pk=""`}},

	// --- several dialects in one response ---

	// constructed from the documented samples of each dialect, in the reverse of Read's order:
	// one quota per dialect and name, never merged, even where names match ("requests")
	{name: "mixed/every-dialect",
		at: time.Date(2024, 1, 16, 15, 50, 0, 0, time.UTC),
		lines: []string{
			`x-ratelimit-limit-requests: 60`, `x-ratelimit-remaining-requests: 59`, `x-ratelimit-reset-requests: 1s`,
			`x-rate-limit-limit: 900`, `x-rate-limit-remaining: 847`, `x-rate-limit-reset: 1705420800`,
			`x-ratelimit-limit: 5000`, `x-ratelimit-remaining: 4966`, `x-ratelimit-used: 34`, `x-ratelimit-reset: 1705420800`,
			`RateLimit-Limit: 10`, `RateLimit-Remaining: 1`, `RateLimit-Reset: 7`,
			`RateLimit: "requests";r=50;t=30`,
			`RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400`,
		},
		want: []string{
			`ratelimit/burst limit=100 remaining=-1 used=-1 reset=none window=1m0s unit=requests pk=""`,
			`ratelimit/daily limit=1000 remaining=-1 used=-1 reset=none window=24h0m0s unit=requests pk=""`,
			`ratelimit/requests limit=-1 remaining=50 used=-1 reset=+30s window=0s unit=requests pk=""`,
			`ratelimit-trio/default limit=10 remaining=1 used=-1 reset=+7s window=0s unit=requests pk=""`,
			`github/core limit=5000 remaining=4966 used=34 reset=+10m0s window=0s unit=requests pk=""`,
			`x/default limit=900 remaining=847 used=-1 reset=+10m0s window=0s unit=requests pk=""`,
			`openai/requests limit=60 remaining=59 used=-1 reset=+1s window=0s unit=requests pk=""`,
		}},
	// constructed: the trio's Integer policy and the new String policy share RateLimit-Policy
	{name: "mixed/both-policy-shapes",
		lines: []string{`RateLimit-Policy: 100;w=60, "burst";q=100;w=10`, `RateLimit-Limit: 100`, `RateLimit-Remaining: 99`},
		want: []string{
			`ratelimit/burst limit=100 remaining=-1 used=-1 reset=none window=10s unit=requests pk=""`,
			`ratelimit-trio/default limit=100 remaining=99 used=-1 reset=none window=1m0s unit=requests pk=""`,
		}},

	// --- Structured Field syntax (RFC 9651, https://www.rfc-editor.org/rfc/rfc9651); outcomes checked
	// against github.com/dunglas/httpsfv v1.1.2 in the notes' table ---

	// constructed; section 4.2.3.2: SP is allowed after ";"
	{name: "sf/sp-after-semicolon",
		lines: []string{`RateLimit: "default"; r=50;t=30`},
		want:  []string{`ratelimit/default limit=-1 remaining=50 used=-1 reset=+30s window=0s unit=requests pk=""`}},
	// constructed; section 4.2.3.2: but not before it, so the field is ignored
	{name: "sf/sp-before-semicolon", lines: []string{`RateLimit: "default" ;r=50`}},
	// constructed; section 4.2.3.2: nor around "="
	{name: "sf/sp-around-equals", lines: []string{`RateLimit: "default";r = 50`}},
	// constructed; section 4.2.3.3: keys are lower case
	{name: "sf/uppercase-key", lines: []string{`RateLimit: "default";R=50`}},
	// constructed; section 4.2.4: an Integer has at most 15 digits
	{name: "sf/integer-16-digits", lines: []string{`RateLimit: "default";r=1000000000000000`}},
	// constructed; section 4.2.4: 15 digits is the largest Integer, below 2^53
	{name: "sf/integer-15-digits",
		lines: []string{`RateLimit: "default";r=999999999999999`},
		want:  []string{`ratelimit/default limit=-1 remaining=999999999999999 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 4.2.1: a trailing comma fails the field
	{name: "sf/trailing-comma", lines: []string{`RateLimit: "default";r=50;t=30,`}},
	// constructed; section 4.2: lines are joined into one List
	{name: "sf/two-lines",
		lines: []string{`RateLimit: "a";r=1`, `RateLimit: "b";r=2`},
		want: []string{
			`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`,
			`ratelimit/b limit=-1 remaining=2 used=-1 reset=none window=0s unit=requests pk=""`,
		}},
	// constructed; an empty line holds no member
	{name: "sf/empty-line",
		lines: []string{`RateLimit:`, `RateLimit: "a";r=1`},
		want:  []string{`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 4.2: one malformed member fails the whole field
	{name: "sf/one-bad-member", lines: []string{`RateLimit: "a";r=1, "b";r=`}},
	// constructed; section 4.2.1: OWS is SP or HTAB around commas
	{name: "sf/htab-around-comma",
		lines: []string{"RateLimit: \"a\";r=1\t,\t\"b\";r=2"},
		want: []string{
			`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`,
			`ratelimit/b limit=-1 remaining=2 used=-1 reset=none window=0s unit=requests pk=""`,
		}},
	// constructed; section 4.2.5: escapes of DQUOTE and backslash only
	{name: "sf/string-escapes",
		lines: []string{`RateLimit: "a\"b\\c";r=1`},
		want:  []string{`ratelimit/a"b\c limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 4.2.5: any other escape fails
	{name: "sf/string-bad-escape", lines: []string{`RateLimit: "a\n";r=1`}},
	// constructed; section 4.2.5: Strings are ASCII
	{name: "sf/string-non-ascii", lines: []string{`RateLimit: "café";r=1`}},
	// constructed; sections 4.2.9 and 4.2.10: a Date and a Display String in vendors' parameters
	{name: "sf/date-and-display-string",
		lines: []string{`RateLimit: "a";r=1;acme-at=@1659578233;acme-note=%"f%c3%bc"`},
		want:  []string{`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 4.2.10: a Display String must be UTF-8
	{name: "sf/display-string-not-utf8", lines: []string{`RateLimit: "a";r=1;acme-note=%"%ff"`}},
	// constructed; section 4.2.10: with lowercase hex
	{name: "sf/display-string-uppercase-hex", lines: []string{`RateLimit: "a";r=1;acme-note=%"%C3%BC"`}},
	// constructed; section 4.2.7: characters outside base64 fail the field
	{name: "sf/binary-bad-alphabet", lines: []string{`RateLimit: "a";r=1;pk=:ab$c:`}},
	// constructed; section 4.2.7: padding may be absent
	{name: "sf/binary-unpadded",
		lines: []string{`RateLimit: "a";r=1;pk=:QXBwLTk5OQ:`},
		want:  []string{`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk="App-999"`}},
	// constructed; section 4.2.1.2: an Inner List parses, and is no quota
	{name: "sf/inner-list-skipped",
		lines: []string{`RateLimit: ("a" "b");r=1, "c";r=2`},
		want:  []string{`ratelimit/c limit=-1 remaining=2 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 4.2.3.2: the last of duplicate parameters wins
	{name: "sf/duplicate-parameter",
		lines: []string{`RateLimit: "a";r=-1;r=5`},
		want:  []string{`ratelimit/a limit=-1 remaining=5 used=-1 reset=none window=0s unit=requests pk=""`}},

	// --- the draft's rules on members (https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt) ---

	// constructed; section 4.1: r "is a non-negative Integer"
	{name: "draft/r-negative", lines: []string{`RateLimit: "default";r=-1`}},
	// constructed; section 4.1: a Decimal is no Integer
	{name: "draft/r-decimal", lines: []string{`RateLimit: "default";r=1.5`}},
	// constructed; section 4.1: r is REQUIRED
	{name: "draft/r-missing", lines: []string{`RateLimit: "a";t=5`}},
	// constructed; section 4.1: t is "a non-negative Integer"
	{name: "draft/t-negative", lines: []string{`RateLimit: "a";r=1;t=-5`}},
	// constructed; only the members that break a rule are dropped
	{name: "draft/wrong-types",
		lines: []string{`RateLimit: "a";r="5", "b";r=2;t=?1, "c";r=3;pk="x", d;r=4, "";r=5, "e";r=6`},
		want:  []string{`ratelimit/e limit=-1 remaining=6 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 3.1: a policy that breaks a rule is dropped, its RateLimit member kept
	{name: "draft/q-negative",
		lines: []string{`RateLimit-Policy: "a";q=-1`, `RateLimit: "a";r=1`},
		want:  []string{`ratelimit/a limit=-1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 3.1: q is REQUIRED, w is "non-zero", qu "MUST be a String", pk a Byte Sequence
	{name: "draft/policy-rules",
		lines: []string{`RateLimit-Policy: "a";w=10, "b";q=10;w=0, "c";q=10;qu=tokens, "d";q=10;pk="x", "e";q=10;w=1.5, "";q=10, "f";q=10;qu="request", "g";q=10;qu="tokens"`},
		want: []string{
			`ratelimit/f limit=10 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`,
			`ratelimit/g limit=10 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
		}},
	// constructed; a t or a w more than a year long is dropped alone
	{name: "draft/beyond-a-year",
		lines: []string{`RateLimit-Policy: "a";q=10;w=31536001, "b";q=10;w=31536000`, `RateLimit: "a";r=1;t=31536001, "b";r=1;t=31536000`},
		want: []string{
			`ratelimit/a limit=10 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`,
			`ratelimit/b limit=10 remaining=1 used=-1 reset=+8760h0m0s window=8760h0m0s unit=requests pk=""`,
		}},
	// constructed; the first member of a name wins, in each field
	{name: "draft/duplicate-names",
		lines: []string{`RateLimit-Policy: "a";q=1, "a";q=2`, `RateLimit: "a";r=1, "a";r=2`},
		want:  []string{`ratelimit/a limit=1 remaining=1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; RateLimit's pk is the request's partition, over the policy's
	{name: "draft/partition-from-ratelimit",
		lines: []string{`RateLimit-Policy: "peruser";q=100;w=60;pk=:dHJpYWwxMjEzMjM=:`, `RateLimit: "peruser";r=9;pk=:QXBwLTk5OQ==:`},
		want:  []string{`ratelimit/peruser limit=100 remaining=9 used=-1 reset=none window=1m0s unit=requests pk="App-999"`}},

	// --- the trio's rules (https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06) ---

	// constructed; section 5.2: lines joined are a List, no Item, so Remaining is ignored
	{name: "trio/remaining-two-lines",
		lines: []string{`RateLimit-Limit: 10`, `RateLimit-Remaining: 1`, `RateLimit-Remaining: 1`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 5.2: likewise joined by a proxy
	{name: "trio/remaining-joined",
		lines: []string{`RateLimit-Limit: 10`, `RateLimit-Remaining: 1, 1`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; section 5.1: a negative limit is not announced, and parameters are ignored
	{name: "trio/limit-negative",
		lines: []string{`RateLimit-Limit: -10`, `RateLimit-Remaining: 5;acme=1`, `RateLimit-Reset: 1.5`},
		want:  []string{`ratelimit-trio/default limit=-1 remaining=5 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; a String is no Integer
	{name: "trio/limit-string", lines: []string{`RateLimit-Limit: "10"`}},
	// constructed; the limit's own w
	{name: "trio/limit-own-window",
		lines: []string{`RateLimit-Limit: 10;w=5`, `RateLimit-Remaining: 3`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=3 used=-1 reset=none window=5s unit=requests pk=""`}},
	// constructed; -06's invalid "10;w=1, 10;w=60": which window is unknown
	{name: "trio/policies-disagree",
		lines: []string{`RateLimit-Limit: 10`, `RateLimit-Policy: 10;w=1, 10;w=60`},
		want:  []string{`ratelimit-trio/default limit=10 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`}},

	// --- GitHub, X and OpenAI counts and resets ---

	// constructed; https://docs.github.com/en/rest/rate-limit/rate-limit (the example's graphql resource):
	// GraphQL counts points
	{name: "github/resource-graphql",
		at:    time.Unix(1691590000, 0).UTC(),
		lines: []string{`x-ratelimit-limit: 5000`, `x-ratelimit-remaining: 4993`, `x-ratelimit-used: 7`, `x-ratelimit-reset: 1691593228`, `x-ratelimit-resource: graphql`},
		want:  []string{`github/graphql limit=5000 remaining=4993 used=7 reset=+53m48s window=0s unit=points pk=""`}},
	// constructed; same example's search resource
	{name: "github/resource-search",
		at:    time.Unix(1691590000, 0).UTC(),
		lines: []string{`x-ratelimit-limit: 30`, `x-ratelimit-remaining: 18`, `x-ratelimit-used: 12`, `x-ratelimit-reset: 1691591091`, `x-ratelimit-resource: search`},
		want:  []string{`github/search limit=30 remaining=18 used=12 reset=+18m11s window=0s unit=requests pk=""`}},
	// constructed; a resource that cannot be a name leaves the quota unattributable
	{name: "github/resource-malformed",
		lines: []string{`x-ratelimit-limit: 30`, `x-ratelimit-remaining: 18`, `x-ratelimit-resource: core search`}},
	// constructed; resource lines that disagree
	{name: "github/resource-lines-disagree",
		lines: []string{`x-ratelimit-limit: 30`, `x-ratelimit-remaining: 18`, `x-ratelimit-resource: core`, `x-ratelimit-resource: search`}},
	// constructed; counts above 2^53, or with a sign, or not decimal, are not announced
	{name: "github/counts-malformed",
		lines: []string{`x-ratelimit-limit: 99999999999999999999`, `x-ratelimit-remaining: 9007199254740992`, `x-ratelimit-used: +4`},
		want:  []string{`github/core limit=-1 remaining=9007199254740992 used=-1 reset=none window=0s unit=requests pk=""`}},
	// constructed; 2^53+1 is too large
	{name: "github/count-above-2^53",
		lines: []string{`x-ratelimit-limit: 9007199254740993`, `x-ratelimit-remaining: 0x3c`}},
	// constructed; lines, or values joined by a proxy, that agree are read; those that disagree are not
	{name: "github/duplicates",
		lines: []string{`x-ratelimit-limit: 60, 60`, `x-ratelimit-remaining: 56`, `x-ratelimit-remaining: 55`, `x-ratelimit-used: 4`, `x-ratelimit-used: 4`},
		want:  []string{`github/core limit=60 remaining=-1 used=4 reset=none window=0s unit=requests pk=""`}},
	// constructed; a reset a minute past has happened: now
	{name: "github/reset-just-past",
		at:    time.Unix(1372700933, 0).UTC(),
		lines: []string{`x-ratelimit-limit: 60`, `x-ratelimit-remaining: 0`, `x-ratelimit-reset: 1372700873`},
		want:  []string{`github/core limit=60 remaining=0 used=-1 reset=+0s window=0s unit=requests pk=""`}},
	// constructed; a reset more than a year behind or ahead is unusable
	{name: "github/reset-far",
		lines: []string{`x-ratelimit-limit: 60`, `x-ratelimit-remaining: 0`, `x-ratelimit-reset: 1372700873`, `x-rate-limit-limit: 900`, `x-rate-limit-reset: 99999999999`},
		want: []string{
			`github/core limit=60 remaining=0 used=-1 reset=none window=0s unit=requests pk=""`,
			`x/default limit=900 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`,
		}},
	// constructed; a value no epoch can be is the seconds other servers send
	// (https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt appendix
	// "RateLimit header fields currently used on the web")
	{name: "github/reset-as-seconds",
		lines: []string{`x-ratelimit-limit: 60`, `x-ratelimit-remaining: 59`, `x-ratelimit-reset: 60`},
		want:  []string{`github/core limit=60 remaining=59 used=-1 reset=+1m0s window=0s unit=requests pk=""`}},
	// constructed; durations of the shapes OpenAI sends (https://developers.openai.com/api/docs/guides/rate-limits)
	{name: "openai/durations",
		lines: []string{`x-ratelimit-limit-requests: 60`, `x-ratelimit-remaining-requests: 1`, `x-ratelimit-reset-requests: 2s81ms`, `x-ratelimit-limit-tokens: 150000`, `x-ratelimit-remaining-tokens: 1`, `x-ratelimit-reset-tokens: 1m30.5s`, `x-ratelimit-limit-project-tokens: 60000`, `x-ratelimit-remaining-project-tokens: 1`, `x-ratelimit-reset-project-tokens: 174ms`},
		want: []string{
			`openai/requests limit=60 remaining=1 used=-1 reset=+2.081s window=0s unit=requests pk=""`,
			`openai/tokens limit=150000 remaining=1 used=-1 reset=+1m30.5s window=0s unit=tokens pk=""`,
			`openai/project-tokens limit=60000 remaining=1 used=-1 reset=+174ms window=0s unit=tokens pk=""`,
		}},
	// constructed; junk durations are not announced resets, the quotas stay
	{name: "openai/junk-durations",
		lines: []string{`x-ratelimit-limit-requests: 60`, `x-ratelimit-reset-requests: -1s`, `x-ratelimit-limit-tokens: 1e6`, `x-ratelimit-remaining-tokens: 5`, `x-ratelimit-reset-tokens: 1e3s`, `x-ratelimit-limit-project-tokens: 6`, `x-ratelimit-reset-project-tokens: 8761h`, `x-ratelimit-limit-tokens_usage_based: 7`, `x-ratelimit-reset-tokens_usage_based: 1 s`},
		want: []string{
			`openai/requests limit=60 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`,
			`openai/tokens limit=-1 remaining=5 used=-1 reset=none window=0s unit=tokens pk=""`,
			`openai/project-tokens limit=6 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
			`openai/tokens_usage_based limit=7 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
		}},
	// constructed; a reset is at most 32 bytes long
	{name: "openai/duration-length",
		lines: []string{`x-ratelimit-limit-requests: 60`, `x-ratelimit-reset-requests: 0000000000000000000000000000001s`, `x-ratelimit-limit-tokens: 6`, `x-ratelimit-reset-tokens: 00000000000000000000000000000001s`},
		want: []string{
			`openai/requests limit=60 remaining=-1 used=-1 reset=+1s window=0s unit=requests pk=""`,
			`openai/tokens limit=6 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
		}},
	// constructed; more junk: a sign, words, two points, and the longest reset taken
	{name: "openai/more-junk-durations",
		lines: []string{`x-ratelimit-limit-requests: 60`, `x-ratelimit-reset-requests: +1s`, `x-ratelimit-limit-tokens: 6`, `x-ratelimit-reset-tokens: forever`, `x-ratelimit-limit-project-tokens: 6`, `x-ratelimit-reset-project-tokens: 1.5.3s`, `x-ratelimit-limit-tokens_usage_based: 7`, `x-ratelimit-reset-tokens_usage_based: 8760h`},
		want: []string{
			`openai/requests limit=60 remaining=-1 used=-1 reset=none window=0s unit=requests pk=""`,
			`openai/tokens limit=6 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
			`openai/project-tokens limit=6 remaining=-1 used=-1 reset=none window=0s unit=tokens pk=""`,
			`openai/tokens_usage_based limit=7 remaining=-1 used=-1 reset=+8760h0m0s window=0s unit=tokens pk=""`,
		}},
}

func TestReadRules(t *testing.T) { checkRead(t, ruleCases) }

// TestReadFieldLength: a field is read up to 8 KiB, joined lines included,
// and ignored beyond.
func TestReadFieldLength(t *testing.T) {
	member := `"a";r=1;acme="`
	pad := func(n int) string { return member + strings.Repeat("x", n-len(member)-1) + `"` }
	cases := []struct {
		name  string
		lines []string
		want  int
	}{
		{"8192 bytes", []string{pad(8192)}, 1},
		{"8193 bytes", []string{pad(8193)}, 0},
		{"joined to 8192", []string{pad(4095), `"b";r=1;acme="` + strings.Repeat("x", 4095-15) + `"`}, 2},
		{"joined to 8193", []string{pad(4095), `"b";r=1;acme="` + strings.Repeat("x", 4096-15) + `"`}, 0},
	}
	for _, c := range cases {
		h := http.Header{"Ratelimit": c.lines}
		if got := len(announce.Read(h, now)); got != c.want {
			t.Errorf("%s: Read found %d quotas, want %d", c.name, got, c.want)
		}
	}
}

// TestReadCap: at most 32 quotas, the first ones in Read's order.
func TestReadCap(t *testing.T) {
	var policies []string
	for i := range 40 {
		policies = append(policies, fmt.Sprintf(`"p%d";q=%d`, i, i))
	}
	h := http.Header{}
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("X-Ratelimit-Limit", "60")
	got := announce.Read(h, now)
	if len(got) != 32 {
		t.Fatalf("Read returned %d quotas, want 32", len(got))
	}
	for i, q := range got {
		if want := fmt.Sprintf("p%d", i); q.Name != want || q.Limit != int64(i) {
			t.Errorf("quota %d is %s with limit %d, want %s with limit %d", i, q.Name, q.Limit, want, i)
		}
	}
}

// TestReadHostile: whatever a response holds, Read's work and memory stay
// bounded: each case allocates at most a few pages.
func TestReadHostile(t *testing.T) {
	many := make([]string, 100000)
	for i := range many {
		many[i] = `"a";r=1`
	}
	cases := []struct {
		name string
		h    http.Header
	}{
		{"100000 lines", http.Header{"Ratelimit": many, "Ratelimit-Policy": many, "X-Ratelimit-Limit": many, "Retry-After": many}},
		{"1 MiB value", http.Header{"Ratelimit": {strings.Repeat(`"a";r=1, `, 1<<17) + `"b";r=2`}}},
		{"8 KiB of members", http.Header{"Ratelimit": {strings.Repeat(`"a";r=1,`, 1000) + `"b";r=2`}}},
		{"8 KiB of escapes", http.Header{"Ratelimit-Policy": {`"` + strings.Repeat(`\\`, 4000) + `";q=1`}}},
		{"8 KiB of pk", http.Header{"Ratelimit-Policy": {`"a";q=1;pk=:` + strings.Repeat("QUFB", 2000) + `:`}}},
		{"many empty lines", http.Header{"Ratelimit": make([]string, 1<<20)}},
		{"long digits", http.Header{"X-Ratelimit-Limit": {strings.Repeat("9", 8000)}, "Retry-After": {strings.Repeat("9", 8000)}}},
	}
	for _, c := range cases {
		allocs := testing.AllocsPerRun(10, func() { announce.Read(c.h, now) })
		if allocs > 8 {
			t.Errorf("%s: Read made %v allocations, want at most 8", c.name, allocs)
		}
		if b := allocBytes(func() { announce.Read(c.h, now) }); b > 64<<10 {
			t.Errorf("%s: Read allocated %d bytes, want at most 64 KiB", c.name, b)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"\t7", 7 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"31536000", 365 * 24 * time.Hour, true},
		{"31536001", 0, false},
		{"99999999999999999999999", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"5 6", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"Mon, 01 Jun 2026 12:01:00 GMT", time.Minute, true},          // IMF-fixdate
		{"Monday, 01-Jun-26 12:01:00 GMT", time.Minute, true},         // RFC 850
		{"Mon Jun  1 12:01:00 2026", time.Minute, true},               // asctime
		{"Mon, 01 Jun 2026 11:00:00 GMT", 0, true},                    // already past: retry now
		{"Tue, 01 Jun 2027 12:00:00 GMT", 365 * 24 * time.Hour, true}, // a year ahead
		{"Tue, 01 Jun 2027 12:00:01 GMT", 0, false},                   // beyond
		{"Mon, 01 Jun 2026 12:01:00 GMT" + strings.Repeat(" ", 40), time.Minute, true},
		{"Mon, 01 Jun 2026 12:01:00 GMT; " + strings.Repeat("x", 40), 0, false},
		{"2026-06-01T12:01:00Z", 0, false}, // RFC 3339 is no HTTP-date
		{strings.Repeat("0", 63) + "7", 7 * time.Second, true},
		{strings.Repeat("0", 64) + "7", 0, false}, // longer than 64 bytes
	}
	for _, c := range cases {
		got, ok := announce.RetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// allocBytes returns the bytes f allocates, averaged over 10 runs.
func allocBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 10
}
