package ytsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// discoveryMethod is one row of testdata/discovery-methods.tsv.
type discoveryMethod struct {
	id, verb, path, simpleUpload, resumableUpload string
}

// name is the Server's name of the method: the id without "youtube.".
func (d discoveryMethod) name() string { return strings.TrimPrefix(d.id, "youtube.") }

// readDiscovery reads the method list of the discovery document.
func readDiscovery(t *testing.T) []discoveryMethod {
	t.Helper()
	f, err := os.Open("testdata/discovery-methods.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []discoveryMethod
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 5 {
			t.Fatalf("line %d: %d columns, want 5", line+1, len(cols))
		}
		if line == 0 {
			continue // the header
		}
		out = append(out, discoveryMethod{cols[0], cols[1], cols[2], cols[3], cols[4]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 83 {
		t.Fatalf("%d methods in the discovery list, want 83", len(out))
	}
	return out
}

// wantClassic is every method's classic price as the research notes list
// it (reads 1 and writes 50 where Google publishes none).
var wantClassic = map[string]int64{
	"abuseReports.insert": 50, "activities.list": 1,
	"captions.delete": 50, "captions.download": 200, "captions.insert": 400, "captions.list": 50, "captions.update": 450,
	"channelBanners.insert":  50,
	"channelSections.delete": 50, "channelSections.insert": 50, "channelSections.list": 1, "channelSections.update": 50,
	"channels.list": 1, "channels.update": 50,
	"commentThreads.insert": 50, "commentThreads.list": 1,
	"comments.delete": 50, "comments.insert": 50, "comments.list": 1, "comments.markAsSpam": 50,
	"comments.setModerationStatus": 50, "comments.update": 50,
	"i18nLanguages.list": 1, "i18nRegions.list": 1,
	"liveBroadcasts.bind": 50, "liveBroadcasts.delete": 50, "liveBroadcasts.insert": 50, "liveBroadcasts.insertCuepoint": 50,
	"liveBroadcasts.list": 1, "liveBroadcasts.transition": 50, "liveBroadcasts.update": 50,
	"liveChatBans.delete": 50, "liveChatBans.insert": 50,
	"liveChatMessages.delete": 20, "liveChatMessages.insert": 20, "liveChatMessages.list": 5, "liveChatMessages.transition": 20,
	"liveChatModerators.delete": 50, "liveChatModerators.insert": 50, "liveChatModerators.list": 1,
	"liveStreams.delete": 50, "liveStreams.insert": 50, "liveStreams.list": 1, "liveStreams.update": 50,
	"members.list": 1, "membershipsLevels.list": 1,
	"playlistImages.delete": 50, "playlistImages.insert": 50, "playlistImages.list": 1, "playlistImages.update": 50,
	"playlistItems.delete": 50, "playlistItems.insert": 50, "playlistItems.list": 1, "playlistItems.update": 50,
	"playlists.delete": 50, "playlists.insert": 50, "playlists.list": 1, "playlists.update": 50,
	"search.list":          100,
	"subscriptions.delete": 50, "subscriptions.insert": 50, "subscriptions.list": 1,
	"superChatEvents.list": 1, "tests.insert": 50,
	"thirdPartyLinks.delete": 50, "thirdPartyLinks.insert": 50, "thirdPartyLinks.list": 1, "thirdPartyLinks.update": 50,
	"thumbnails.set": 50, "videoAbuseReportReasons.list": 1, "videoCategories.list": 1, "videoTrainability.get": 1,
	"videos.batchGetStats": 1, "videos.delete": 50, "videos.getRating": 1, "videos.insert": 100, "videos.list": 1,
	"videos.rate": 50, "videos.reportAbuse": 50, "videos.update": 50,
	"watermarks.set": 50, "watermarks.unset": 50,
	"youtube.v3.liveChat.messages.stream": 5,
}

// wantCharge is what one call of the named method spends in a model.
func wantCharge(name string, granular bool) charge {
	switch {
	case name == "videos.batchGetStats":
		return charge{BatchGetStats, 1} // its own bucket in both models
	case granular && name == "search.list":
		return charge{Search, 1}
	case granular && name == "videos.insert":
		return charge{Upload, 1}
	}
	return charge{Pool, wantClassic[name]}
}

// TestTablesMatchDiscovery: the Server's method and price tables hold
// exactly the discovery document's methods, each with the page its price
// comes from.
func TestTablesMatchDiscovery(t *testing.T) {
	disc := readDiscovery(t)
	byName := map[string]method{}
	for _, m := range methods {
		if _, dup := byName[m.name]; dup {
			t.Errorf("method %s listed twice", m.name)
		}
		byName[m.name] = m
	}
	prices := map[string]price{}
	for _, p := range classicPrices {
		if _, dup := prices[p.method]; dup {
			t.Errorf("price of %s listed twice", p.method)
		}
		if p.source == "" {
			t.Errorf("price of %s cites no page", p.method)
		}
		prices[p.method] = p
	}
	for _, d := range disc {
		m, ok := byName[d.name()]
		if !ok {
			t.Errorf("%s: not served", d.id)
			continue
		}
		media := d.simpleUpload != ""
		if m.verb != d.verb || m.path != d.path || m.media != media {
			t.Errorf("%s: served as %s %s (media %v), want %s %s (media %v)", d.id, m.verb, m.path, m.media, d.verb, d.path, media)
		}
		if media && (d.simpleUpload != "/upload"+d.path || d.resumableUpload != "/resumable/upload"+d.path) {
			t.Errorf("%s: upload paths %q and %q are not the path under /upload and /resumable/upload", d.id, d.simpleUpload, d.resumableUpload)
		}
		if p, ok := prices[d.name()]; !ok || p.units != wantClassic[d.name()] {
			t.Errorf("%s: classic price %+v, want %d units", d.id, p, wantClassic[d.name()])
		}
	}
	if len(methods) != len(disc) || len(classicPrices) != len(disc) || len(wantClassic) != len(disc) {
		t.Errorf("%d methods, %d prices, %d wanted prices; want %d each", len(methods), len(classicPrices), len(wantClassic), len(disc))
	}
	for name := range ownBucket {
		if _, ok := prices[name]; !ok {
			t.Errorf("a bucket of its own for %s, which has no price", name)
		}
	}
}

// callPath returns the path to call d at: its path parameter filled in.
func callPath(d discoveryMethod) string {
	return strings.ReplaceAll(d.path, "{id}", "caption-1")
}

// TestEveryMethodCharged calls every method of the discovery document as
// Google's Go client sends it and checks the answer and the charge, in
// both models.
func TestEveryMethodCharged(t *testing.T) {
	for _, granular := range []bool{false, true} {
		model := "classic"
		if granular {
			model = "granular"
		}
		for _, d := range readDiscovery(t) {
			t.Run(model+"/"+d.name(), func(t *testing.T) {
				s, base := start(t, Config{Granular: granular})
				root := strings.TrimSuffix(base, "/youtube/v3")
				var body []byte
				if d.verb == http.MethodPost || d.verb == http.MethodPut {
					body = []byte(`{"snippet":{"title":"simulated"}}`)
				}
				resp, got := send(t, d.verb, root+callPath(d)+"?part=snippet&id=x1&key=k&alt=json&prettyPrint=false", nil, body)
				if resp.StatusCode/100 != 2 {
					t.Fatalf("status %d, want 2xx; body %s", resp.StatusCode, got)
				}
				checkAnswer(t, d.name(), resp, got)
				want := wantCharge(d.name(), granular)
				wantArrival := Arrival{At: t0, Project: "k", Method: d.name(), Bucket: want.bucket, Units: want.units, Status: resp.StatusCode}
				if a := last(t, s); a != wantArrival {
					t.Errorf("arrival %+v, want %+v", a, wantArrival)
				}
				if st := s.BucketStats(want.bucket)["k"]; st.Units != want.units || st.Requests != 1 {
					t.Errorf("%s bucket stats %+v, want 1 request, %d units", want.bucket, st, want.units)
				}
			})
		}
	}
}

// checkAnswer checks that a successful answer has the method's shape: 204
// with no body, a caption track, or JSON of the method's kind.
func checkAnswer(t *testing.T, name string, resp *http.Response, body []byte) {
	t.Helper()
	var m *method
	for i := range methods {
		if methods[i].name == name {
			m = &methods[i]
		}
	}
	switch {
	case m == nil:
		t.Fatalf("no method %s", name)
	case m.shape == noContent:
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Errorf("answer %d %q, want 204 without a body", resp.StatusCode, body)
		}
	case m.shape == mediaDownload:
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || len(body) == 0 {
			t.Errorf("answer %q (%s), want a caption track", body, resp.Header.Get("Content-Type"))
		}
	default:
		var head struct {
			Kind  string          `json:"kind"`
			Etag  string          `json:"etag"`
			ID    string          `json:"id"`
			Items json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			t.Fatalf("answer %q: %v", body, err)
		}
		if m.kind != "" && head.Kind != m.kind || head.Etag == "" {
			t.Errorf("answer %s, want kind %q and an etag", body, m.kind)
		}
		if m.shape == list && !bytes.HasPrefix(head.Items, []byte("[")) {
			t.Errorf("answer %s, want a list of items", body)
		}
		if m.shape == resource && head.ID == "" {
			t.Errorf("answer %s, want an id", body)
		}
	}
}

// send sends one request with a body and returns the response with its
// body read.
func send(t *testing.T, method, url string, header http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
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
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp, buf.Bytes()
}

// TestResourceAnswer: an insert answers the resource sent, under its kind,
// an etag and a new id; an update keeps the resource's id; an action names
// its resource by the id parameter.
func TestResourceAnswer(t *testing.T) {
	_, base := start(t, Config{})
	tests := []struct {
		method, path, body string
		wantID             string // "" for a new one
		wantTitle          string
	}{
		{"POST", "/playlists?part=snippet", `{"snippet":{"title":"Mix \u003c1\u003e"}}`, "", "Mix <1>"},
		{"PUT", "/playlists?part=snippet", `{"id":"PL1","snippet":{"title":"Renamed"}}`, "PL1", "Renamed"},
		{"POST", "/liveBroadcasts/bind?part=id&id=B1&streamId=S1", ``, "B1", ""},
	}
	for _, tt := range tests {
		resp, body := send(t, tt.method, base+tt.path+"&key=k", nil, []byte(tt.body))
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: status %d; body %s", tt.method, tt.path, resp.StatusCode, body)
		}
		var got struct {
			ID      string `json:"id"`
			Snippet struct {
				Title string `json:"title"`
			} `json:"snippet"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if tt.wantID != "" && got.ID != tt.wantID || got.ID == "" || got.Snippet.Title != tt.wantTitle {
			t.Errorf("%s %s: answer %s, want id %q and title %q", tt.method, tt.path, body, tt.wantID, tt.wantTitle)
		}
	}
	// A body that is not JSON is a parse error, and still a call.
	resp, body := send(t, "POST", base+"/playlists?part=snippet&key=k", nil, []byte("{not json"))
	if code, r := reason(t, body); resp.StatusCode != 400 || code != 400 || r != "parseError" {
		t.Errorf("bad JSON: status %d, error %d %q; want 400 parseError", resp.StatusCode, code, r)
	}
}

// TestVideosInsertUnits: a test can set the price videos.insert had
// before 2025-12-04.
func TestVideosInsertUnits(t *testing.T) {
	tests := []struct {
		cfg  Config
		want charge
	}{
		{Config{}, charge{Pool, 100}},
		{Config{VideosInsertUnits: 1600}, charge{Pool, 1600}},
		{Config{VideosInsertUnits: 1600, Granular: true}, charge{Upload, 1}},
	}
	for _, tt := range tests {
		s, base := start(t, tt.cfg)
		root := strings.TrimSuffix(base, "/youtube/v3")
		resp, body := send(t, "POST", root+"/upload/youtube/v3/videos?part=snippet&uploadType=media&key=k", nil, []byte("a video"))
		if resp.StatusCode != 200 {
			t.Fatalf("%+v: status %d; body %s", tt.cfg, resp.StatusCode, body)
		}
		if a := last(t, s); a.Bucket != tt.want.bucket || a.Units != tt.want.units {
			t.Errorf("%+v: arrival %+v, want %d units of %s", tt.cfg, a, tt.want.units, tt.want.bucket)
		}
	}
}

// TestGranularBuckets: each granular bucket refuses its method once spent,
// and the pool is untouched by them.
func TestGranularBuckets(t *testing.T) {
	s, base := start(t, Config{Granular: true, Quota: 1000, UploadQuota: 2, BatchStatsQuota: 3})
	root := strings.TrimSuffix(base, "/youtube/v3")
	tests := []struct {
		method, path string
		bucket       string
		calls        int // admitted before the refusal
	}{
		{"POST", "/upload/youtube/v3/videos?part=id&uploadType=media", Upload, 2},
		{"GET", "/youtube/v3/videos:batchGetStats?id=a", BatchGetStats, 3},
	}
	for _, tt := range tests {
		for i := 0; i <= tt.calls; i++ {
			resp, body := send(t, tt.method, root+tt.path+"&key=k", nil, []byte("x"))
			want := 200
			if i == tt.calls {
				want = 403
				if string(body) != wantQuotaBody {
					t.Errorf("%s: refusal %s, want quotaExceeded", tt.path, body)
				}
			}
			if resp.StatusCode != want {
				t.Fatalf("%s call %d: status %d, want %d; body %s", tt.path, i, resp.StatusCode, want, body)
			}
		}
		want := ProjectStats{Requests: int64(tt.calls) + 1, Units: int64(tt.calls), QuotaErrors: 1, WindowUnits: int64(tt.calls)}
		if got := s.BucketStats(tt.bucket)["k"]; got != want {
			t.Errorf("%s stats %+v, want %+v", tt.bucket, got, want)
		}
	}
	if st, ok := s.Stats()["k"]; ok {
		t.Errorf("pool stats %+v, want none", st)
	}
}
