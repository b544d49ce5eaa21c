package ytsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

const chunkSize = 256 << 10 // googleapi.MinUploadChunkSize

// openSession opens a resumable upload with a POST at path (under the
// server root) and returns the session URI.
func openSession(t *testing.T, root, path string, header http.Header) string {
	t.Helper()
	return openSessionWith(t, http.MethodPost, root, path, header)
}

// openSessionWith is openSession with another HTTP method: PUT for an
// update.
func openSessionWith(t *testing.T, verb, root, path string, header http.Header) string {
	t.Helper()
	resp, body := send(t, verb, root+path, header, []byte(`{"snippet":{"title":"Holiday"}}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open %s: status %d; body %s", path, resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	u, err := url.Parse(loc)
	if err != nil || !u.IsAbs() || !strings.HasPrefix(loc, root+"/upload/youtube/v3/") ||
		u.Query().Get("uploadType") != "resumable" || u.Query().Get("upload_id") == "" {
		t.Fatalf("open %s: Location %q, want an absolute session URI on the server", path, loc)
	}
	return loc
}

// put sends one request to a session: verb, Content-Range (none when ""),
// whether to send X-GUploader-No-308, and n bytes.
func put(t *testing.T, uri, verb, contentRange string, no308 bool, n int) (*http.Response, []byte) {
	t.Helper()
	h := http.Header{"Content-Type": {"video/mp4"}}
	if contentRange != "" {
		h.Set("Content-Range", contentRange)
	}
	if no308 {
		h.Set("X-GUploader-No-308", "yes")
	}
	return send(t, verb, uri, h, bytes.Repeat([]byte{'v'}, n))
}

// checkIncomplete checks an answer that says the upload goes on with held
// bytes: 308, or 200 with the override header for a client that sent
// X-GUploader-No-308.
func checkIncomplete(t *testing.T, resp *http.Response, no308 bool, held int64) {
	t.Helper()
	wantStatus, wantOverride := http.StatusPermanentRedirect, ""
	if no308 {
		wantStatus, wantOverride = http.StatusOK, "308"
	}
	wantRange := ""
	if held > 0 {
		wantRange = fmt.Sprintf("bytes=0-%d", held-1)
	}
	got := fmt.Sprintf("%d override %q range %q location %q", resp.StatusCode,
		resp.Header.Get("X-Http-Status-Code-Override"), resp.Header.Get("Range"), resp.Header.Get("Location"))
	want := fmt.Sprintf("%d override %q range %q location %q", wantStatus, wantOverride, wantRange, "")
	if got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
}

// TestResumableUpload uploads a video in 256 KiB chunks the two ways
// clients do: POST with X-GUploader-No-308 (Google's Go client) and PUT
// (the protocol guide), asks for the status between chunks, and checks the
// upload is one call, charged once.
func TestResumableUpload(t *testing.T) {
	tests := []struct {
		name  string
		verb  string
		no308 bool
		size  int // of the file
	}{
		{"go client", http.MethodPost, true, 3*chunkSize + 1000},
		{"go client, whole chunks", http.MethodPost, true, 2 * chunkSize},
		{"protocol guide", http.MethodPut, false, 3*chunkSize + 1000},
		{"protocol guide, one byte", http.MethodPut, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := start(t, Config{})
			root := strings.TrimSuffix(base, "/youtube/v3")
			uri := openSession(t, root, "/upload/youtube/v3/videos?part=snippet&uploadType=resumable&key=k",
				http.Header{"X-Upload-Content-Type": {"video/mp4"}})

			// Before any chunk: nothing held, so no Range.
			resp, _ := put(t, uri, tt.verb, "bytes */*", tt.no308, 0)
			checkIncomplete(t, resp, tt.no308, 0)

			var final *http.Response
			var finalBody []byte
			chunks := 0
			for off := 0; off < tt.size; off += chunkSize {
				n := min(chunkSize, tt.size-off)
				last := off+n == tt.size
				total := "*"
				if last {
					total = fmt.Sprint(tt.size)
				}
				resp, body := put(t, uri, tt.verb, fmt.Sprintf("bytes %d-%d/%s", off, off+n-1, total), tt.no308, n)
				chunks++
				if last {
					final, finalBody = resp, body
					break
				}
				checkIncomplete(t, resp, tt.no308, int64(off+n))
				// A status request in between (the guide's, with the
				// file's length) changes nothing.
				resp, _ = put(t, uri, tt.verb, fmt.Sprintf("bytes */%d", tt.size), tt.no308, 0)
				checkIncomplete(t, resp, tt.no308, int64(off+n))
				chunks++
			}
			if final == nil { // a whole number of chunks: the Go client ends with an empty request
				final, finalBody = put(t, uri, tt.verb, fmt.Sprintf("bytes */%d", tt.size), tt.no308, 0)
				chunks++
			}
			if final.StatusCode != http.StatusOK || final.Header.Get("X-Http-Status-Code-Override") != "" {
				t.Fatalf("last chunk: status %d, override %q; body %s", final.StatusCode, final.Header.Get("X-Http-Status-Code-Override"), finalBody)
			}
			var video struct {
				Kind, ID string
				Snippet  struct{ Title string }
			}
			if err := json.Unmarshal(finalBody, &video); err != nil {
				t.Fatal(err)
			}
			if video.Kind != "youtube#video" || len(video.ID) != 11 || video.Snippet.Title != "Holiday" {
				t.Errorf("created %s, want the video sent, with an 11-character id", finalBody)
			}
			// Asked again, the session answers the video again.
			if resp, body := put(t, uri, tt.verb, fmt.Sprintf("bytes */%d", tt.size), tt.no308, 0); resp.StatusCode != 200 || !bytes.Equal(body, finalBody) {
				t.Errorf("after the end: %d %s, want the video again", resp.StatusCode, body)
			}
			chunks++

			arrivals := s.Arrivals()
			if len(arrivals) != 2+chunks {
				t.Fatalf("%d arrivals, want the opening call, the first status request and %d more", len(arrivals), chunks)
			}
			want := Arrival{At: t0, Project: "k", Method: "videos.insert", Bucket: Pool, Units: DefaultVideosInsertUnits, Status: 200}
			if arrivals[0] != want {
				t.Errorf("first arrival %+v, want %+v", arrivals[0], want)
			}
			for i, a := range arrivals[1:] {
				if !a.Chunk || a.Units != 0 || a.Method != "videos.insert" || a.Project != "k" {
					t.Errorf("arrival %d: %+v, want an uncharged chunk of videos.insert", i+1, a)
				}
			}
			wantStats := ProjectStats{Requests: 1, Units: DefaultVideosInsertUnits, WindowUnits: DefaultVideosInsertUnits}
			if got := s.Stats()["k"]; got != wantStats {
				t.Errorf("stats %+v, want %+v", got, wantStats)
			}
		})
	}
}

// TestUploadMethods: every method that takes a file opens a session at its
// /upload and /resumable/upload paths, and takes a multipart or media
// upload, each one call at its price; the session URI is always under
// /upload.
func TestUploadMethods(t *testing.T) {
	for _, d := range readDiscovery(t) {
		if d.simpleUpload == "" {
			continue
		}
		for _, path := range []string{d.simpleUpload, d.resumableUpload} {
			for _, kind := range []string{"resumable", "multipart", "media"} {
				t.Run(d.name()+path+"/"+kind, func(t *testing.T) {
					s, base := start(t, Config{})
					root := strings.TrimSuffix(base, "/youtube/v3")
					u := root + path + "?part=snippet&key=k&uploadType=" + kind
					var resp *http.Response
					var body []byte
					switch kind {
					case "resumable":
						uri := openSessionWith(t, d.verb, root, path+"?part=snippet&key=k&uploadType=resumable", nil)
						resp, body = put(t, uri, http.MethodPut, "", false, 5000) // the whole file at once
					case "multipart":
						h, b := multipartBody(t, `{"snippet":{"title":"Holiday"}}`, 5000)
						resp, body = send(t, d.verb, u, h, b)
					default:
						resp, body = send(t, d.verb, u, http.Header{"Content-Type": {"image/png"}}, bytes.Repeat([]byte{1}, 5000))
					}
					if resp.StatusCode/100 != 2 {
						t.Fatalf("status %d; body %s", resp.StatusCode, body)
					}
					checkAnswer(t, d.name(), resp, body)
					if kind == "multipart" && strings.HasSuffix(d.name(), "s.insert") && !bytes.Contains(body, []byte("Holiday")) {
						t.Errorf("answer %s, want the resource sent", body)
					}
					charged := 0
					for _, a := range s.Arrivals() {
						if a.Units > 0 {
							charged++
							if a.Method != d.name() || a.Units != wantClassic[d.name()] || a.Chunk {
								t.Errorf("charged arrival %+v, want %s at %d units", a, d.name(), wantClassic[d.name()])
							}
						}
					}
					if charged != 1 {
						t.Errorf("%d charged arrivals, want 1", charged)
					}
				})
			}
		}
	}
}

// multipartBody builds a multipart/related upload of a JSON resource and a
// file of n bytes, as Google's Go client does.
func multipartBody(t *testing.T, resource string, n int) (http.Header, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, part := range []struct {
		contentType string
		body        []byte
	}{
		{"application/json", []byte(resource)},
		{"application/octet-stream", bytes.Repeat([]byte{2}, n)},
	} {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.contentType}})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(part.body)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return http.Header{"Content-Type": {"multipart/related; boundary=" + mw.Boundary()}}, buf.Bytes()
}

// TestUploadTypeErrors: an upload path without a known uploadType is
// refused, and charged as a call.
func TestUploadTypeErrors(t *testing.T) {
	tests := []struct {
		query, contentType string
		wantReason         string
	}{
		{"", "video/mp4", "notUpload"},
		{"&uploadType=chunked", "video/mp4", "unsupportedMediaProtocol"},
		{"&uploadType=multipart", "video/mp4", "badContent"},
		{"&uploadType=multipart", "multipart/related", "badContent"}, // no boundary
	}
	for _, tt := range tests {
		s, base := start(t, Config{})
		root := strings.TrimSuffix(base, "/youtube/v3")
		resp, body := send(t, "POST", root+"/upload/youtube/v3/videos?part=id&key=k"+tt.query, http.Header{"Content-Type": {tt.contentType}}, []byte("data"))
		if code, r := reason(t, body); resp.StatusCode != 400 || code != 400 || r != tt.wantReason {
			t.Errorf("%q: status %d, error %d %q; want 400 %q", tt.query, resp.StatusCode, code, r, tt.wantReason)
		}
		if a := last(t, s); a.Units != DefaultVideosInsertUnits || a.Method != "videos.insert" {
			t.Errorf("%q: arrival %+v, want videos.insert charged", tt.query, a)
		}
	}
}

// TestContentRange: what a session answers to each Content-Range, from a
// session holding 2 chunks.
func TestContentRange(t *testing.T) {
	const held = 2 * chunkSize
	tests := []struct {
		name         string
		contentRange string // "" for none
		n            int    // bytes sent
		wantStatus   int
		wantText     string // the body of an error
		wantHeld     int64  // after the request
		wantAlive    bool   // the session still works
	}{
		{"next chunk", fmt.Sprintf("bytes %d-%d/*", held, held+chunkSize-1), chunkSize, 200, "", held + chunkSize, true},
		{"last chunk sent again", fmt.Sprintf("bytes %d-%d/*", chunkSize, held-1), chunkSize, 200, "", held, true},
		{"overlapping chunk", fmt.Sprintf("bytes %d-%d/*", chunkSize, held+9), chunkSize + 10, 200, "", held + 10, true},
		{"status", "bytes */*", 0, 200, "", held, true},
		{"status with a total", "bytes */9999999", 0, 200, "", held, true},
		{"status with a smaller total", "bytes */10", 0, 200, "", held, true},
		{"gap", fmt.Sprintf("bytes %d-%d/*", held+1, held+chunkSize), chunkSize, 503,
			fmt.Sprintf("Invalid request. According to the Content-Range header, the upload offset is %d byte(s), which exceeds already uploaded size of %d byte(s).", held+1, held),
			held, true},
		{"fewer bytes than the range", fmt.Sprintf("bytes %d-%d/*", held, held+chunkSize-1), chunkSize - 1, 400, "", held, true},
		{"a status request with bytes", "bytes */*", 10, 400, "", held, true},
		{"no unit", fmt.Sprintf("%d-%d/*", held, held+9), 10, 400, "Failed to parse Content-Range header.", 0, false},
		{"no total", fmt.Sprintf("bytes %d-%d", held, held+9), 10, 400, "Failed to parse Content-Range header.", 0, false},
		{"backwards", fmt.Sprintf("bytes %d-%d/*", held+9, held), 10, 400, "Failed to parse Content-Range header.", 0, false},
		{"last byte past the total", fmt.Sprintf("bytes %d-%d/%d", held, held+9, held+9), 10, 400, "Failed to parse Content-Range header.", 0, false},
		{"signed offset", fmt.Sprintf("bytes +%d-%d/*", held, held+9), 10, 400, "Failed to parse Content-Range header.", 0, false},
		{"empty", "bytes ", 0, 400, "Failed to parse Content-Range header.", 0, false},
		{"the whole file, no header", "", held + 5, 200, "", held + 5, false}, // done: the file is complete
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := start(t, Config{})
			root := strings.TrimSuffix(base, "/youtube/v3")
			uri := openSession(t, root, "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k", nil)
			for off := 0; off < held; off += chunkSize {
				resp, _ := put(t, uri, http.MethodPost, fmt.Sprintf("bytes %d-%d/*", off, off+chunkSize-1), true, chunkSize)
				checkIncomplete(t, resp, true, int64(off+chunkSize))
			}

			var resp *http.Response
			var body []byte
			if tt.contentRange == "" {
				resp, body = send(t, http.MethodPost, uri, http.Header{"X-GUploader-No-308": {"yes"}}, make([]byte, tt.n))
			} else {
				resp, body = put(t, uri, http.MethodPost, tt.contentRange, true, tt.n)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantText != "" && string(body) != tt.wantText {
				t.Errorf("body %q, want %q", body, tt.wantText)
			}
			if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("error Content-Type %q, want text/plain", resp.Header.Get("Content-Type"))
			}
			if tt.wantStatus == 200 && tt.wantAlive {
				checkIncomplete(t, resp, true, tt.wantHeld)
			}

			// Then: is the session alive, and holding what it should?
			resp, body = put(t, uri, http.MethodPost, "bytes */*", true, 0)
			switch {
			case tt.wantAlive:
				checkIncomplete(t, resp, true, tt.wantHeld)
			case tt.wantStatus == 200: // complete
				if resp.StatusCode != 200 || resp.Header.Get("X-Http-Status-Code-Override") != "" || !bytes.Contains(body, []byte(`"youtube#video"`)) {
					t.Errorf("after the end: %d %s, want the video", resp.StatusCode, body)
				}
			default:
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("after %q: status %d, want 404: the session is no longer active", tt.contentRange, resp.StatusCode)
				}
			}
			if st := s.Stats()["k"]; st.Units != DefaultVideosInsertUnits || st.Requests != 1 {
				t.Errorf("stats %+v, want one call charged once", st)
			}
		})
	}
}

// TestUploadDeclaredLength: a length given when the session opens
// (X-Upload-Content-Length) ends the upload at its last byte and bounds
// the chunks.
func TestUploadDeclaredLength(t *testing.T) {
	_, base := start(t, Config{})
	root := strings.TrimSuffix(base, "/youtube/v3")
	open := func() string {
		return openSession(t, root, "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k",
			http.Header{"X-Upload-Content-Length": {"300"}})
	}
	uri := open()
	resp, _ := put(t, uri, http.MethodPut, "bytes 0-99/*", false, 100)
	checkIncomplete(t, resp, false, 100)
	if resp, body := put(t, uri, http.MethodPut, "bytes 100-299/*", false, 200); resp.StatusCode != 200 || !bytes.Contains(body, []byte("youtube#video")) {
		t.Errorf("reaching the declared length: %d %s, want the video", resp.StatusCode, body)
	}

	for _, cr := range []string{"bytes 0-300/*", "bytes 0-9/301", "bytes */299"} {
		uri := open()
		if resp, body := put(t, uri, http.MethodPut, cr, false, sent(cr)); resp.StatusCode != 400 {
			t.Errorf("%q against a declared 300: %d %s, want 400", cr, resp.StatusCode, body)
		}
	}
	if resp, body := send(t, "POST", root+"/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k",
		http.Header{"X-Upload-Content-Length": {"-1"}}, nil); resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Errorf("a negative length: %d %s, want 400 and no session", resp.StatusCode, body)
	}
}

// sent is the number of bytes a Content-Range of the form "bytes a-b/…"
// carries; 0 for "bytes */…".
func sent(cr string) int {
	var a, b int
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/", &a, &b); err != nil {
		return 0
	}
	return b - a + 1
}

// TestUploadSessionExpiry: a session lives UploadTTL from its opening, then
// answers 404, and expired sessions do not pile up.
func TestUploadSessionExpiry(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		c := testclock.New(t0)
		s, base := start(t, Config{Now: c.Now, UploadTTL: ttl})
		root := strings.TrimSuffix(base, "/youtube/v3")
		life := ttl
		if life == 0 {
			life = 7 * 24 * time.Hour
		}
		uri := openSession(t, root, "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k", nil)
		c.Set(t0.Add(life - time.Nanosecond))
		resp, _ := put(t, uri, http.MethodPut, "bytes 0-9/*", false, 10)
		checkIncomplete(t, resp, false, 10)
		c.Set(t0.Add(life))
		if resp, body := put(t, uri, http.MethodPut, "bytes 10-19/*", false, 10); resp.StatusCode != http.StatusNotFound {
			t.Errorf("TTL %v: a chunk at the end of the session's life: %d %s, want 404", ttl, resp.StatusCode, body)
		}
		if a := last(t, s); !a.Chunk || a.Units != 0 || a.Project != "" || a.Status != 404 {
			t.Errorf("TTL %v: arrival %+v, want an uncharged chunk of no session", ttl, a)
		}
	}

	// Memory: sessions left unfinished are dropped once expired.
	c := testclock.New(t0)
	s, base := start(t, Config{Now: c.Now, UploadTTL: time.Minute, Quota: 1 << 40})
	root := strings.TrimSuffix(base, "/youtube/v3")
	for round := range 5 {
		c.Set(t0.Add(time.Duration(round) * time.Hour))
		for range 100 {
			openSession(t, root, "/upload/youtube/v3/captions?part=id&uploadType=resumable&key=k", nil)
		}
	}
	s.mu.Lock()
	held := len(s.sessions)
	s.mu.Unlock()
	if held > 2*100+sweepFloor {
		t.Errorf("%d sessions held after 5 rounds of 100 that expire within the hour, want at most %d", held, 2*100+sweepFloor)
	}
}

// TestUploadRefused: a session is not opened when its call is refused,
// and a refused opening is not charged.
func TestUploadRefused(t *testing.T) {
	s, base := start(t, Config{Quota: 150})
	root := strings.TrimSuffix(base, "/youtube/v3")
	open := root + "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k"
	openSession(t, root, "/upload/youtube/v3/videos?part=id&uploadType=resumable&key=k", nil)
	resp, body := send(t, "POST", open, nil, nil) // 200 > 150
	if resp.StatusCode != 403 || string(body) != wantQuotaBody || resp.Header.Get("Location") != "" {
		t.Errorf("over quota: %d %s, Location %q; want quotaExceeded and no session", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	resp, body = send(t, "POST", strings.Replace(open, "key=k", "key=", 1), nil, nil)
	if resp.StatusCode != 403 || resp.Header.Get("Location") != "" {
		t.Errorf("no key: %d %s; want 403 and no session", resp.StatusCode, body)
	}
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	if st := s.Stats()["k"]; n != 1 || st.Units != 100 || st.QuotaErrors != 1 {
		t.Errorf("%d sessions, stats %+v; want 1 session, 100 units, 1 quota error", n, st)
	}
}

// TestUploadConcurrency runs uploads and reads side by side (go test
// -race): every upload completes, and each is charged exactly once.
func TestUploadConcurrency(t *testing.T) {
	s, base := start(t, Config{Quota: 1 << 40})
	root := strings.TrimSuffix(base, "/youtube/v3")
	// try is send for other goroutines: it reports, never stops the test.
	try := func(method, url string, h http.Header, body []byte) (*http.Response, bool) {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return nil, false
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil, false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, true
	}
	const uploads, chunks = 8, 4
	var wg sync.WaitGroup
	for g := range uploads {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", g%2)
			resp, ok := try(http.MethodPost, root+"/upload/youtube/v3/videos?part=id&uploadType=resumable&key="+key, nil, nil)
			if !ok || resp.StatusCode != 200 {
				t.Errorf("upload %d: the session did not open", g)
				return
			}
			uri := resp.Header.Get("Location")
			for i := range chunks {
				total := "*"
				if i == chunks-1 {
					total = fmt.Sprint(chunks * chunkSize)
				}
				h := http.Header{
					"Content-Range":      {fmt.Sprintf("bytes %d-%d/%s", i*chunkSize, (i+1)*chunkSize-1, total)},
					"X-Guploader-No-308": {"yes"},
				}
				resp, ok := try(http.MethodPost, uri, h, make([]byte, chunkSize))
				if !ok {
					return
				}
				done := resp.StatusCode == 200 && resp.Header.Get("X-Http-Status-Code-Override") == ""
				if done != (i == chunks-1) || resp.StatusCode != 200 {
					t.Errorf("upload %d chunk %d: %d (override %q)", g, i, resp.StatusCode, resp.Header.Get("X-Http-Status-Code-Override"))
				}
				if _, ok := try(http.MethodGet, base+"/videos?part=id&chart=mostPopular&key="+key, nil, nil); !ok {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, key := range []string{"k0", "k1"} {
		want := ProjectStats{Requests: uploads / 2 * (1 + chunks), Units: uploads / 2 * (DefaultVideosInsertUnits + chunks)}
		want.WindowUnits = want.Units
		if got := s.Stats()[key]; got != want {
			t.Errorf("%s: stats %+v, want %+v", key, got, want)
		}
	}
	if n := len(s.Arrivals()); n != uploads*(1+2*chunks) {
		t.Errorf("%d arrivals, want %d", n, uploads*(1+2*chunks))
	}
}
