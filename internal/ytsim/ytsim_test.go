package ytsim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// t0 is a fixed instant for tests that do not cross a window.
var t0 = time.Date(2026, 5, 12, 9, 30, 0, 0, time.UTC)

// start serves a Server built from cfg on loopback and returns it with the
// API's base URL, "<server>/youtube/v3". A nil cfg.Now is fixed at t0.
func start(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0 }
	}
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL + "/youtube/v3"
}

// do sends one request and returns the response with its body read.
func do(t *testing.T, method, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// get sends a GET and returns the status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, body := do(t, http.MethodGet, url, nil)
	return resp.StatusCode, body
}

// reason parses a Google error body and returns its code and first reason.
func reason(t *testing.T, body []byte) (int, string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(e.Error.Errors) == 0 {
		t.Fatalf("error body %q has no errors", body)
	}
	return e.Error.Code, e.Error.Errors[0].Reason
}

// last returns the last arrival.
func last(t *testing.T, s *Server) Arrival {
	t.Helper()
	a := s.Arrivals()
	if len(a) == 0 {
		t.Fatal("no arrivals")
	}
	return a[len(a)-1]
}

// wantQuotaBody is the quotaExceeded body as the API sends it: compact
// with prettyPrint=false, the link escaped.
const wantQuotaBody = `{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your \u003ca href=\"/youtube/v3/getting-started#quota\"\u003equota\u003c/a\u003e.","errors":[{"message":"The request cannot be completed because you have exceeded your \u003ca href=\"/youtube/v3/getting-started#quota\"\u003equota\u003c/a\u003e.","domain":"youtube.quota","reason":"quotaExceeded"}]}}`

func TestCosts(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string // after the server URL; key=k is added
		wantStatus int
		wantMethod string
		wantUnits  int64
		wantReason string // for errors
	}{
		{"videos chart", "GET", "/youtube/v3/videos?part=snippet&chart=mostPopular", 200, "videos.list", 1, ""},
		{"videos by id", "GET", "/youtube/v3/videos?part=id&id=abc", 200, "videos.list", 1, ""},
		{"channels", "GET", "/youtube/v3/channels?part=snippet&id=UCAAAAAAAAAAAAAAAAAAAAAA", 200, "channels.list", 1, ""},
		{"search", "GET", "/youtube/v3/search?part=snippet&q=cats", 200, "search.list", 100, ""},
		{"head videos", "HEAD", "/youtube/v3/videos?part=id&chart=mostPopular", 200, "videos.list", 1, ""},
		{"unknown path", "GET", "/youtube/v3/guideCategories?part=id", 404, "unknown", 1, "notFound"}, // gone from the API
		{"unknown upload path", "POST", "/upload/youtube/v3/playlists?uploadType=media", 404, "unknown", 1, "notFound"},
		{"wrong method", "PATCH", "/youtube/v3/videos?part=snippet", 405, "videos.PATCH", 1, "methodNotAllowed"},
		{"wrong method on an action", "GET", "/youtube/v3/videos/rate?id=x&rating=like", 405, "videos.GET", 1, "methodNotAllowed"},
		{"wrong method on search", "DELETE", "/youtube/v3/search", 405, "search.DELETE", 1, "methodNotAllowed"},
		{"invalid videos call", "GET", "/youtube/v3/videos?chart=mostPopular", 400, "videos.list", 1, "required"},
		{"invalid search call", "GET", "/youtube/v3/search?part=snippet&maxResults=51", 400, "search.list", 100, "invalidParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := start(t, Config{})
			root := strings.TrimSuffix(base, "/youtube/v3")
			sep := "?"
			if strings.Contains(tt.path, "?") {
				sep = "&"
			}
			resp, body := do(t, tt.method, root+tt.path+sep+"key=k", nil)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Errorf("Content-Type %q, want application/json; charset=UTF-8", ct)
			}
			if tt.wantReason != "" {
				if code, r := reason(t, body); code != tt.wantStatus || r != tt.wantReason {
					t.Errorf("error %d %q, want %d %q", code, r, tt.wantStatus, tt.wantReason)
				}
			}
			want := Arrival{At: t0, Project: "k", Method: tt.wantMethod, Bucket: Pool, Units: tt.wantUnits, Status: tt.wantStatus}
			if got := last(t, s); got != want {
				t.Errorf("arrival %+v, want %+v", got, want)
			}
			st := s.Stats()["k"]
			if st.Units != tt.wantUnits || st.WindowUnits != tt.wantUnits || st.Requests != 1 {
				t.Errorf("stats %+v, want Units and WindowUnits %d, Requests 1", st, tt.wantUnits)
			}
		})
	}
}

// TestGranularSearchBucket: in the granular model search.list spends one
// call of its own bucket, and the pool does not see it.
func TestGranularSearchBucket(t *testing.T) {
	s, base := start(t, Config{Granular: true, SearchQuota: 2, Quota: 3})
	for i, want := range []int{200, 200, 403} {
		resp, body := do(t, "GET", base+"/search?part=snippet&q=x&key=k", nil)
		if resp.StatusCode != want {
			t.Fatalf("search %d: status %d, want %d; body %s", i, resp.StatusCode, want, body)
		}
	}
	if got := last(t, s); got.Bucket != Search || got.Units != 0 || got.Status != 403 {
		t.Errorf("third search arrival %+v, want refused in the search bucket", got)
	}
	if st := s.BucketStats(Search)["k"]; st.Units != 2 || st.QuotaErrors != 1 {
		t.Errorf("search bucket stats %+v, want 2 calls charged and 1 refusal", st)
	}
	for i := range 3 {
		if resp, body := do(t, "GET", base+"/videos?part=id&chart=mostPopular&key=k", nil); resp.StatusCode != 200 {
			t.Fatalf("videos %d after the search bucket ran out: %d %s", i, resp.StatusCode, body)
		}
	}
	if st := s.Stats()["k"]; st.Units != 3 {
		t.Errorf("pool stats %+v, want the 3 videos.list units only", st)
	}
}

func TestOutsideAPINotCharged(t *testing.T) {
	s, base := start(t, Config{})
	root := strings.TrimSuffix(base, "/youtube/v3")
	status, body := get(t, root+"/other?key=k")
	if status != 404 {
		t.Fatalf("status %d, want 404; body %s", status, body)
	}
	if a := last(t, s); a.Units != 0 || a.Method != "" || a.Status != 404 {
		t.Errorf("arrival %+v, want 0 units, no method, status 404", a)
	}
}

func TestMethodNotAllowedAllow(t *testing.T) {
	_, base := start(t, Config{})
	root := strings.TrimSuffix(base, "/youtube/v3")
	tests := []struct {
		method, path string
		want         string
	}{
		{http.MethodPut, "/youtube/v3/search", "GET, HEAD"},
		{http.MethodPatch, "/youtube/v3/videos", "DELETE, GET, HEAD, POST, PUT"},
		{http.MethodGet, "/youtube/v3/comments/markAsSpam", "POST"},
		{http.MethodDelete, "/upload/youtube/v3/captions", "POST, PUT"},
	}
	for _, tt := range tests {
		resp, body := do(t, tt.method, root+tt.path+"?key=k", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405; body %s", tt.method, tt.path, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Allow"); got != tt.want {
			t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestQuotaRefusal(t *testing.T) {
	s, base := start(t, Config{Quota: 250})
	search := base + "/search?part=snippet&q=x&key=k"
	videos := base + "/videos?part=id&chart=mostPopular&key=k"
	steps := []struct {
		url        string
		wantStatus int
		wantWindow int64 // WindowUnits after the call
	}{
		{search, 200, 100},
		{search, 200, 200},
		{search, 403, 200}, // 300 > 250
	}
	for i := 0; i < 50; i++ { // videos.list still fits, up to 250 exactly
		steps = append(steps, struct {
			url        string
			wantStatus int
			wantWindow int64
		}{videos, 200, 201 + int64(i)})
	}
	steps = append(steps, struct {
		url        string
		wantStatus int
		wantWindow int64
	}{videos, 403, 250})

	for i, st := range steps {
		resp, body := do(t, http.MethodGet, st.url, nil)
		if resp.StatusCode != st.wantStatus {
			t.Fatalf("step %d: status %d, want %d; body %s", i, resp.StatusCode, st.wantStatus, body)
		}
		if st.wantStatus == 403 {
			if string(body) != wantQuotaBody {
				t.Errorf("step %d: body\n%s\nwant\n%s", i, body, wantQuotaBody)
			}
			if code, r := reason(t, body); code != 403 || r != "quotaExceeded" {
				t.Errorf("step %d: error %d %q, want 403 quotaExceeded", i, code, r)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Errorf("step %d: Content-Type %q", i, ct)
			}
			if a := last(t, s); a.Units != 0 || a.Status != 403 {
				t.Errorf("step %d: arrival %+v, want 0 units, status 403", i, a)
			}
		}
		if got := s.Stats()["k"].WindowUnits; got != st.wantWindow {
			t.Fatalf("step %d: WindowUnits %d, want %d", i, got, st.wantWindow)
		}
	}
	want := ProjectStats{Requests: int64(len(steps)), Units: 250, QuotaErrors: 2, WindowUnits: 250}
	if got := s.Stats()["k"]; got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

func TestWindowStart(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		window time.Duration
		a, b   time.Time
		same   bool
	}{
		{"pacific: 23-hour day, 00:30 PST and 23:30 PDT", 0,
			time.Date(2026, 3, 8, 0, 30, 0, 0, la), time.Date(2026, 3, 8, 23, 30, 0, 0, la), true},
		{"pacific: 23:30 PDT and 00:00:30 next day", 0,
			time.Date(2026, 3, 8, 23, 30, 0, 0, la), time.Date(2026, 3, 9, 0, 0, 30, 0, la), false},
		{"pacific: 25-hour day, 00:30 PDT and 23:30 PST", 0,
			time.Date(2026, 11, 1, 0, 30, 0, 0, la), time.Date(2026, 11, 1, 23, 30, 0, 0, la), true},
		{"pacific: 23:59:59 PST and midnight", 0,
			time.Date(2026, 11, 1, 23, 59, 59, 0, la), time.Date(2026, 11, 2, 0, 0, 0, 0, la), false},
		{"pacific: not the UTC day", 0,
			time.Date(2026, 5, 12, 1, 0, 0, 0, time.UTC), time.Date(2026, 5, 11, 23, 0, 0, 0, time.UTC), true},
		{"fixed: aligned to the epoch", 7 * time.Second,
			time.Unix(14, 0), time.Unix(20, 999_999_999), true},
		{"fixed: boundary at 21s", 7 * time.Second,
			time.Unix(20, 999_999_999), time.Unix(21, 0), false},
		{"fixed: before 1970", 7 * time.Second,
			time.Unix(-7, 0), time.Unix(-1, 0), true},
		{"fixed: hour", time.Hour,
			time.Date(2026, 5, 12, 10, 59, 59, 0, time.UTC), time.Date(2026, 5, 12, 11, 0, 0, 0, time.UTC), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wa, wb := windowStart(tt.a, tt.window), windowStart(tt.b, tt.window)
			if got := wa.Equal(wb); got != tt.same {
				t.Errorf("same window %v (starts %v and %v), want %v", got, wa, wb, tt.same)
			}
			if wa.After(tt.a) || wb.After(tt.b) {
				t.Errorf("window starts %v, %v after instants %v, %v", wa, wb, tt.a, tt.b)
			}
		})
	}
}

func TestWindowReset(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		window time.Duration
		first  time.Time // search.list at first fills the quota of 100
		same   time.Time // still in first's window: refused
		next   time.Time // the next window: admitted again
	}{
		{"fixed hour", time.Hour,
			time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC),
			time.Date(2026, 5, 12, 10, 59, 59, 0, time.UTC),
			time.Date(2026, 5, 12, 11, 0, 0, 0, time.UTC)},
		{"pacific day, 23 hours", 0,
			time.Date(2026, 3, 8, 0, 30, 0, 0, la),
			time.Date(2026, 3, 8, 23, 30, 0, 0, la),
			time.Date(2026, 3, 9, 0, 0, 30, 0, la)},
		{"pacific day, 25 hours", 0,
			time.Date(2026, 11, 1, 0, 30, 0, 0, la),
			time.Date(2026, 11, 1, 23, 30, 0, 0, la),
			time.Date(2026, 11, 2, 0, 0, 30, 0, la)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testclock.New(tt.first)
			s, base := start(t, Config{Quota: 100, Window: tt.window, Now: c.Now})
			search := base + "/search?part=id&key=k"
			for _, step := range []struct {
				at         time.Time
				wantStatus int
				wantWindow int64
			}{
				{tt.first, 200, 100},
				{tt.same, 403, 100},
				{tt.next, 200, 100},
				{tt.next, 403, 100},
			} {
				c.Set(step.at)
				if status, body := get(t, search); status != step.wantStatus {
					t.Fatalf("at %v: status %d, want %d; body %s", step.at, status, step.wantStatus, body)
				}
				if got := s.Stats()["k"].WindowUnits; got != step.wantWindow {
					t.Errorf("at %v: WindowUnits %d, want %d", step.at, got, step.wantWindow)
				}
			}
			c.Set(tt.next.Add(48 * time.Hour))
			want := ProjectStats{Requests: 4, Units: 200, QuotaErrors: 2, WindowUnits: 0}
			if got := s.Stats()["k"]; got != want {
				t.Errorf("stats two days later %+v, want %+v", got, want)
			}
		})
	}
}

// listPage is the part of a list response the tests read.
type listPage struct {
	Kind          string            `json:"kind"`
	NextPageToken string            `json:"nextPageToken"`
	PageInfo      pageInfo          `json:"pageInfo"`
	Items         []json.RawMessage `json:"items"`
}

type itemHead struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Snippet *struct {
		ChannelID    string `json:"channelId"`
		ChannelTitle string `json:"channelTitle"`
		Title        string `json:"title"`
	} `json:"snippet"`
	Statistics *struct {
		ViewCount string `json:"viewCount"`
	} `json:"statistics"`
}

func decodePage(t *testing.T, body []byte) (listPage, []itemHead) {
	t.Helper()
	var p listPage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("list body %q: %v", body, err)
	}
	heads := make([]itemHead, len(p.Items))
	for i, raw := range p.Items {
		if err := json.Unmarshal(raw, &heads[i]); err != nil {
			t.Fatalf("item %s: %v", raw, err)
		}
	}
	return p, heads
}

// chart reads a region's whole mostPopular chart, 50 a page, and returns
// the raw items and the pages' sizes.
func chart(t *testing.T, base, region, parts string) ([]json.RawMessage, []int) {
	t.Helper()
	var items []json.RawMessage
	var sizes []int
	token := ""
	for range 10 {
		u := base + "/videos?part=" + parts + "&chart=mostPopular&maxResults=50&regionCode=" + region + "&key=k"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		status, body := get(t, u)
		if status != 200 {
			t.Fatalf("page %d: status %d; body %s", len(sizes)+1, status, body)
		}
		p, _ := decodePage(t, body)
		if p.PageInfo != (pageInfo{TotalResults: 200, ResultsPerPage: 50}) {
			t.Errorf("page %d: pageInfo %+v, want 200 total, 50 per page", len(sizes)+1, p.PageInfo)
		}
		items = append(items, p.Items...)
		sizes = append(sizes, len(p.Items))
		if token = p.NextPageToken; token == "" {
			return items, sizes
		}
	}
	t.Fatalf("no last page after %d pages", len(sizes))
	return nil, nil
}

func TestPagination(t *testing.T) {
	s, base := start(t, Config{})
	items, sizes := chart(t, base, "US", "snippet,statistics")
	if fmt.Sprint(sizes) != "[50 50 50 50]" {
		t.Fatalf("page sizes %v, want [50 50 50 50]", sizes)
	}
	ids := map[string]bool{}
	for _, raw := range items {
		var h itemHead
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		if h.Kind != "youtube#video" || len(h.ID) != 11 || h.Snippet == nil || h.Statistics == nil {
			t.Errorf("item %s: want a youtube#video with an 11-character id, snippet and statistics", raw)
		}
		ids[h.ID] = true
	}
	if len(ids) != 200 {
		t.Errorf("%d distinct ids, want 200", len(ids))
	}
	if got := s.Stats()["k"].Units; got != 4 {
		t.Errorf("charged %d units for 4 pages, want 4", got)
	}

	// The default page is 5 long.
	_, body := get(t, base+"/videos?part=id&chart=mostPopular&key=k")
	if p, _ := decodePage(t, body); len(p.Items) != 5 || p.PageInfo.ResultsPerPage != 5 || p.NextPageToken == "" {
		t.Errorf("default page: %d items, pageInfo %+v, next %q; want 5 items and a next page", len(p.Items), p.PageInfo, p.NextPageToken)
	}
}

func TestBadParameters(t *testing.T) {
	tok := func(s string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s))) }
	tests := []struct {
		name       string
		path       string
		wantReason string
	}{
		{"token not base64", "/videos?part=id&chart=mostPopular&pageToken=%21%21", "invalidPageToken"},
		{"token not a number", "/videos?part=id&chart=mostPopular&pageToken=" + tok("p:abc"), "invalidPageToken"},
		{"token past the end", "/videos?part=id&chart=mostPopular&pageToken=" + tok("p:200"), "invalidPageToken"},
		{"token negative", "/videos?part=id&chart=mostPopular&pageToken=" + tok("p:-1"), "invalidPageToken"},
		{"token wrong prefix", "/videos?part=id&chart=mostPopular&pageToken=" + tok("x:50"), "invalidPageToken"},
		{"token padded number", "/videos?part=id&chart=mostPopular&pageToken=" + tok("p:050"), "invalidPageToken"},
		{"search token", "/search?part=id&pageToken=junk", "invalidPageToken"},
		{"maxResults 0", "/videos?part=id&chart=mostPopular&maxResults=0", "invalidParameter"},
		{"maxResults 51", "/videos?part=id&chart=mostPopular&maxResults=51", "invalidParameter"},
		{"maxResults text", "/videos?part=id&chart=mostPopular&maxResults=x", "invalidParameter"},
		{"videos without part", "/videos?chart=mostPopular", "required"},
		{"videos empty part", "/videos?part=&chart=mostPopular", "required"},
		{"unknown part", "/videos?part=fileDetails&chart=mostPopular", "unknownPart"},
		{"no filter", "/videos?part=id", "missingRequiredParameter"},
		{"two filters", "/videos?part=id&chart=mostPopular&id=x", "incompatibleParameters"},
		{"other chart", "/videos?part=id&chart=leastPopular", "invalidChart"},
		{"bad region", "/videos?part=id&chart=mostPopular&regionCode=USA", "invalidRegionCode"},
		{"51 video ids", "/videos?part=id&id=" + strings.Repeat("a,", 50) + "a", "invalidParameter"},
		{"channels without part", "/channels?id=UCAAAAAAAAAAAAAAAAAAAAAA", "required"},
		{"channels without id", "/channels?part=id", "missingRequiredParameter"},
		{"search without part", "/search?q=x", "required"},
		{"search maxResults -1", "/search?part=id&maxResults=-1", "invalidParameter"},
		{"search bad type", "/search?part=id&type=song", "invalidParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := start(t, Config{})
			status, body := get(t, base+tt.path+"&key=k")
			if status != 400 {
				t.Fatalf("status %d, want 400; body %s", status, body)
			}
			if code, r := reason(t, body); code != 400 || r != tt.wantReason {
				t.Errorf("error %d %q, want 400 %q", code, r, tt.wantReason)
			}
			if a := last(t, s); a.Units == 0 {
				t.Errorf("arrival %+v: an invalid request must still cost", a)
			}
		})
	}
}

func TestVideosByID(t *testing.T) {
	_, base := start(t, Config{})
	items, _ := chart(t, base, "GB", "snippet,statistics")
	ids := make([]string, len(items))
	for i, raw := range items {
		var h itemHead
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		ids[i] = h.ID
	}
	// A corrupted id (one character changed) is not a video.
	swap := "A"
	if ids[5][5] == 'A' {
		swap = "B"
	}
	bogus := ids[5][:5] + swap + ids[5][6:]
	query := strings.Join([]string{ids[3], bogus, ids[199], "nope"}, ",")
	status, body := get(t, base+"/videos?part=snippet,statistics&id="+url.QueryEscape(query)+"&key=k")
	if status != 200 {
		t.Fatalf("status %d; body %s", status, body)
	}
	p, _ := decodePage(t, body)
	if len(p.Items) != 2 {
		t.Fatalf("%d items, want 2 (ids 3 and 199 of the chart); body %s", len(p.Items), body)
	}
	for i, want := range []json.RawMessage{items[3], items[199]} {
		if !bytes.Equal(p.Items[i], want) {
			t.Errorf("item %d\n%s\nwant the chart's\n%s", i, p.Items[i], want)
		}
	}
	if p.Kind != "youtube#videoListResponse" || p.PageInfo.TotalResults != 2 || p.NextPageToken != "" {
		t.Errorf("kind %q pageInfo %+v next %q, want videoListResponse, 2 results, no next page", p.Kind, p.PageInfo, p.NextPageToken)
	}
}

func TestChannels(t *testing.T) {
	s, base := start(t, Config{})
	channelsOf := func(region string) (map[string]string, []string) {
		items, _ := chart(t, base, region, "snippet")
		titles := map[string]string{}
		var order []string
		for _, raw := range items {
			var h itemHead
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			if _, ok := titles[h.Snippet.ChannelID]; !ok {
				order = append(order, h.Snippet.ChannelID)
			}
			titles[h.Snippet.ChannelID] = h.Snippet.ChannelTitle
		}
		return titles, order
	}
	us, usOrder := channelsOf("US")
	gb, _ := channelsOf("GB")
	if len(us) < 30 || len(us) > 40 {
		t.Errorf("%d distinct channels in the US chart, want 30..40", len(us))
	}
	shared := 0
	for id := range us {
		if _, ok := gb[id]; ok {
			shared++
		}
	}
	if shared == 0 || shared == len(us) {
		t.Errorf("%d of %d US channels also in GB, want some but not all", shared, len(us))
	}

	// channels.list agrees with the videos' channelTitle.
	ids := usOrder[:min(len(usOrder), 20)]
	status, body := get(t, base+"/channels?part=snippet,statistics&id="+strings.Join(ids, ",")+",notachannel&key=k")
	if status != 200 {
		t.Fatalf("status %d; body %s", status, body)
	}
	var resp struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind       string         `json:"kind"`
			ID         string         `json:"id"`
			Snippet    channelSnippet `json:"snippet"`
			Statistics channelStats   `json:"statistics"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Kind != "youtube#channelListResponse" || len(resp.Items) != len(ids) {
		t.Fatalf("kind %q with %d items, want youtube#channelListResponse with %d", resp.Kind, len(resp.Items), len(ids))
	}
	for i, it := range resp.Items {
		if it.ID != ids[i] || it.Kind != "youtube#channel" || it.Snippet.Title != us[it.ID] || it.Statistics.SubscriberCount == "" {
			t.Errorf("item %d: %+v, want channel %s titled %q with statistics", i, it, ids[i], us[ids[i]])
		}
	}

	// At most 50 ids.
	fifty := make([]string, 50)
	for i := range fifty {
		fifty[i] = regionChannelID("FR", i%channelsPerRegion)
	}
	if status, body := get(t, base+"/channels?part=id&id="+strings.Join(fifty, ",")+"&key=k"); status != 200 {
		t.Errorf("50 ids: status %d, want 200; body %s", status, body)
	}
	status, body = get(t, base+"/channels?part=id&id="+strings.Join(append(fifty, fifty[0]), ",")+"&key=k")
	if status != 400 {
		t.Fatalf("51 ids: status %d, want 400; body %s", status, body)
	}
	if _, r := reason(t, body); r != "invalidParameter" {
		t.Errorf("51 ids: reason %q, want invalidParameter", r)
	}
	if a := last(t, s); a.Units != 1 || a.Method != "channels.list" {
		t.Errorf("51 ids: arrival %+v, want channels.list charged 1", a)
	}
}

func TestSearch(t *testing.T) {
	_, base := start(t, Config{Quota: 100_000})
	type result struct {
		Kind string   `json:"kind"`
		ID   searchID `json:"id"`
	}
	read := func(query string) ([]result, string, listResponse) {
		t.Helper()
		status, body := get(t, base+"/search?"+query+"&key=k")
		if status != 200 {
			t.Fatalf("%s: status %d; body %s", query, status, body)
		}
		var resp struct {
			listResponse
			Items []result `json:"items"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Items, resp.NextPageToken, resp.listResponse
	}
	tests := []struct {
		query     string
		wantKind  string
		wantItems int
		wantTotal int
	}{
		{"part=snippet&q=cats", "youtube#video", 5, 200},
		{"part=id&q=cats&type=video&maxResults=50", "youtube#video", 50, 200},
		{"part=snippet&q=cats&type=channel&maxResults=50", "youtube#channel", 40, 40},
		{"part=snippet&q=cats&type=playlist", "", 0, 0},
		{"part=id&q=cats&maxResults=0", "", 0, 200},
	}
	for _, tt := range tests {
		items, _, resp := read(tt.query)
		if resp.Kind != "youtube#searchListResponse" || resp.RegionCode != "US" || resp.PageInfo.TotalResults != tt.wantTotal {
			t.Errorf("%s: kind %q region %q total %d, want youtube#searchListResponse, US, %d",
				tt.query, resp.Kind, resp.RegionCode, resp.PageInfo.TotalResults, tt.wantTotal)
		}
		if len(items) != tt.wantItems {
			t.Errorf("%s: %d items, want %d", tt.query, len(items), tt.wantItems)
		}
		for _, it := range items {
			if it.Kind != "youtube#searchResult" || it.ID.Kind != tt.wantKind || it.ID.VideoID == "" && it.ID.ChannelID == "" {
				t.Errorf("%s: item %+v, want a searchResult of kind %s", tt.query, it, tt.wantKind)
			}
		}
	}

	// Following the pages of a query visits every chart video once.
	seen := map[string]bool{}
	token := ""
	for range 10 {
		q := "part=id&q=dogs&regionCode=jp&maxResults=50"
		if token != "" {
			q += "&pageToken=" + token
		}
		var items []result
		items, token, _ = read(q)
		for _, it := range items {
			if _, ok := parseVideoID(it.ID.VideoID); !ok || seen[it.ID.VideoID] {
				t.Errorf("video %q: repeated or not in the catalogue", it.ID.VideoID)
			}
			seen[it.ID.VideoID] = true
		}
		if token == "" {
			break
		}
	}
	if len(seen) != 200 {
		t.Errorf("search visited %d videos, want 200", len(seen))
	}
}

func TestKeys(t *testing.T) {
	const secret = "AIzaSySECRET-key-do-not-echo"
	tests := []struct {
		name        string
		projects    map[string]string
		path        string // after the base URL
		header      string // X-Goog-Api-Key
		wantStatus  int
		wantReason  string
		wantProject string
		wantUnits   int64
	}{
		{"query key", nil, "/videos?part=id&chart=mostPopular&key=k1", "", 200, "", "k1", 1},
		{"header key", nil, "/videos?part=id&chart=mostPopular", "k2", 200, "", "k2", 1},
		{"mapped key", map[string]string{"k1": "proj"}, "/videos?part=id&chart=mostPopular&key=k1", "", 200, "", "proj", 1},
		{"mapped header key", map[string]string{"k1": "proj"}, "/search?part=id", "k1", 200, "", "proj", 100},
		{"no key", nil, "/videos?part=id&chart=mostPopular", "", 403, "forbidden", "", 0},
		{"no key, unknown path", nil, "/playlists", "", 403, "forbidden", "", 0},
		{"unknown key in query", map[string]string{"k1": "proj"}, "/videos?part=id&chart=mostPopular&key=" + secret, "", 400, "keyInvalid", "", 0},
		{"unknown key in header", map[string]string{"k1": "proj"}, "/videos?part=id&chart=mostPopular", secret, 400, "keyInvalid", "", 0},
		{"unknown key, unknown path", map[string]string{"k1": "proj"}, "/" + secret + "?key=" + secret, "", 400, "keyInvalid", "", 0},
		{"unknown key, bad parameter", map[string]string{"k1": "proj"}, "/videos?part=" + secret + "&key=" + secret, "", 400, "keyInvalid", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := start(t, Config{Projects: tt.projects})
			h := http.Header{}
			if tt.header != "" {
				h.Set("X-Goog-Api-Key", tt.header)
			}
			resp, body := do(t, http.MethodGet, base+tt.path, h)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantReason != "" {
				code, r := reason(t, body)
				if code != tt.wantStatus || r != tt.wantReason {
					t.Errorf("error %d %q, want %d %q", code, r, tt.wantStatus, tt.wantReason)
				}
				var e errorBody
				json.Unmarshal(body, &e)
				if r == "keyInvalid" && (e.Error.Message != "API key not valid. Please pass a valid API key." || e.Error.Errors[0].Domain != "usageLimits") {
					t.Errorf("keyInvalid error %+v, want Google's message in domain usageLimits", e.Error)
				}
				if r == "forbidden" && e.Error.Errors[0].Domain != "global" {
					t.Errorf("forbidden error %+v, want domain global", e.Error)
				}
			}
			if bytes.Contains(body, []byte(secret)) || bytes.Contains(body, []byte("SECRET")) {
				t.Errorf("body echoes the key: %s", body)
			}
			for k, vs := range resp.Header {
				if strings.Contains(strings.Join(vs, " "), "SECRET") {
					t.Errorf("header %s echoes the key: %q", k, vs)
				}
			}
			a := last(t, s)
			if a.Project != tt.wantProject || a.Units != tt.wantUnits || a.Status != tt.wantStatus {
				t.Errorf("arrival %+v, want project %q, %d units, status %d", a, tt.wantProject, tt.wantUnits, tt.wantStatus)
			}
		})
	}
}

func TestProjectsShareQuota(t *testing.T) {
	s, base := start(t, Config{Quota: 150, Projects: map[string]string{"a": "proj", "b": "proj", "c": "other"}})
	steps := []struct {
		key, path  string
		wantStatus int
	}{
		{"a", "/search?part=id", 200},
		{"b", "/search?part=id", 403}, // 200 > 150: b pays from a's project
		{"c", "/search?part=id", 200}, // another project, its own quota
		{"b", "/videos?part=id&chart=mostPopular", 200},
	}
	for i, st := range steps {
		status, body := get(t, base+st.path+"&key="+st.key)
		if status != st.wantStatus {
			t.Fatalf("step %d: status %d, want %d; body %s", i, status, st.wantStatus, body)
		}
	}
	want := map[string]ProjectStats{
		"proj":  {Requests: 3, Units: 101, QuotaErrors: 1, WindowUnits: 101},
		"other": {Requests: 1, Units: 100, WindowUnits: 100},
	}
	if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stats %v, want %v", got, want)
	}
}

func TestDeterminism(t *testing.T) {
	_, base1 := start(t, Config{})
	_, base2 := start(t, Config{})
	paths := []string{
		"/videos?part=snippet,statistics&chart=mostPopular&regionCode=DE&maxResults=50&pageToken=" + encodePageToken(100),
		"/videos?part=snippet&id=" + videoRef{"DE", 7}.id() + "," + videoRef{"US", 0}.id(),
		"/channels?part=snippet,statistics&id=" + regionChannelID("DE", 3) + "," + regionChannelID("DE", 33),
		"/search?part=snippet&q=lofi&regionCode=BR&maxResults=20",
		"/videos?part=id&chart=mostPopular&maxResults=51",
	}
	for _, p := range paths {
		_, a := get(t, base1+p+"&key=k")
		_, b := get(t, base1+p+"&key=k")
		_, c := get(t, base2+p+"&key=other")
		if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
			t.Errorf("%s: answers differ:\n%s\n%s\n%s", p, a, b, c)
		}
	}
	_, us := get(t, base1+"/videos?part=snippet&chart=mostPopular&regionCode=US&key=k")
	_, gb := get(t, base1+"/videos?part=snippet&chart=mostPopular&regionCode=GB&key=k")
	if bytes.Equal(us, gb) {
		t.Error("US and GB charts are the same")
	}
}

func TestConcurrency(t *testing.T) {
	const quota = 3000
	s, base := start(t, Config{Quota: quota})
	const goroutines, perGoroutine = 8, 50
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", g%2)
			for i := range perGoroutine {
				u := base + "/videos?part=id&chart=mostPopular&key=" + key
				if i%5 == 0 {
					u = base + "/search?part=id&key=" + key
				}
				resp, err := http.Get(u)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	arrivals := s.Arrivals()
	if len(arrivals) != goroutines*perGoroutine {
		t.Fatalf("%d arrivals, want %d", len(arrivals), goroutines*perGoroutine)
	}
	sums := map[string]ProjectStats{}
	arrived := map[int]int{}
	for _, a := range arrivals {
		st := sums[a.Project]
		st.Requests++
		st.Units += a.Units
		st.WindowUnits += a.Units
		if a.Status == http.StatusForbidden {
			st.QuotaErrors++
			if a.Units != 0 {
				t.Errorf("refused arrival %+v was charged", a)
			}
		}
		sums[a.Project] = st
		arrived[a.Status]++
	}
	if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(sums) {
		t.Errorf("stats %v, want the arrivals' sums %v", got, sums)
	}
	if fmt.Sprint(arrived) != fmt.Sprint(statuses) {
		t.Errorf("arrival statuses %v, want what the clients got %v", arrived, statuses)
	}
	for p, st := range sums {
		// Each key asked for 4000 units: the quota must hold, and refusals
		// happen only when the quota is nearly spent.
		if st.Units > quota || st.Units <= quota-100 || st.QuotaErrors == 0 {
			t.Errorf("project %s: %+v, want units in (%d, %d] and some refusals", p, st, quota-100, quota)
		}
	}
}

func TestLatency(t *testing.T) {
	t.Run("answers after the delay", func(t *testing.T) {
		_, base := start(t, Config{Latency: time.Millisecond})
		if status, body := get(t, base+"/videos?part=id&chart=mostPopular&key=k"); status != 200 {
			t.Errorf("status %d, want 200; body %s", status, body)
		}
	})
	t.Run("returns when the context is done", func(t *testing.T) {
		s := New(Config{Latency: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/youtube/v3/videos?part=id&chart=mostPopular&key=k", nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // a liveness guard, not a timing check
			t.Fatal("ServeHTTP still sleeping after the request's context was done")
		}
		// The upstream received the call, so it is charged all the same.
		if st := s.Stats()["k"]; st.Units != 1 {
			t.Errorf("stats %+v, want 1 unit charged", st)
		}
	})
}

// TestBearerToken: without a key, an OAuth token names the project, as a
// key would; a key wins over a token.
func TestBearerToken(t *testing.T) {
	s, base := start(t, Config{Projects: map[string]string{"token-1": "proj", "k": "other"}})
	tests := []struct {
		query, auth string
		wantStatus  int
		wantProject string
	}{
		{"", "Bearer token-1", 200, "proj"},
		{"&key=k", "Bearer token-1", 200, "other"},
		{"", "Basic dG9rZW4tMQ==", 403, ""},
		{"", "Bearer unknown", 400, ""},
	}
	for _, tt := range tests {
		resp, body := do(t, http.MethodGet, base+"/videos?part=id&chart=mostPopular"+tt.query, http.Header{"Authorization": {tt.auth}})
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("%q %q: status %d, want %d; body %s", tt.query, tt.auth, resp.StatusCode, tt.wantStatus, body)
		}
		if a := last(t, s); a.Project != tt.wantProject {
			t.Errorf("%q %q: project %q, want %q", tt.query, tt.auth, a.Project, tt.wantProject)
		}
	}
}
