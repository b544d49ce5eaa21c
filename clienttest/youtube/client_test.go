package youtube_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	yt "google.golang.org/api/youtube/v3"

	"github.com/tollgate/tollgate/providers/youtube"
)

const chunkSize = googleapi.MinUploadChunkSize // 256 KiB

// TestPagedLists: each page of a list is a call, charged its price.
func TestPagedLists(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			ctx := context.Background()
			pages, videos := 0, 0
			for _, per := range []int64{50, 20} {
				err := r.svc.Videos.List([]string{"snippet", "statistics"}).Chart("mostPopular").RegionCode("GB").
					MaxResults(per).Pages(ctx, func(p *yt.VideoListResponse) error {
					pages++
					videos += len(p.Items)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			// The chart holds 200 videos: 4 pages of 50, 10 of 20.
			if pages != 14 || videos != 400 {
				t.Fatalf("%d pages, %d videos; want 14 and 400", pages, videos)
			}
			if _, err := r.svc.Captions.List([]string{"snippet"}, "some-video").Do(); err != nil {
				t.Fatal(err)
			}
			err := r.svc.PlaylistItems.List([]string{"snippet"}).PlaylistId("PL1").Pages(ctx, func(*yt.PlaylistItemListResponse) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Videos.BatchGetStats().Id("a", "b").Part("statistics").Do(); err != nil {
				t.Fatal(err)
			}
			// 14 pages of videos.list, captions.list 50, playlistItems.list 1;
			// videos.batchGetStats in its own bucket in both models.
			r.check(map[string]int64{youtube.Pool: 14 + 50 + 1, youtube.BatchGetStats: 1})
		})
	}
}

// TestSearches: each page of a search is a search.list call: 100 units of
// the pool in the classic model, one of the search bucket's 100 a day in
// the granular one.
func TestSearches(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			ctx := context.Background()
			pages := 0
			count := func(*yt.SearchListResponse) error { pages++; return nil }
			// 200 videos in pages of 50, and 40 channels in pages of 25.
			if err := r.svc.Search.List([]string{"snippet"}).Q("lofi").Type("video").MaxResults(50).Pages(ctx, count); err != nil {
				t.Fatal(err)
			}
			if err := r.svc.Search.List([]string{"id"}).Q("lofi").Type("channel").MaxResults(25).Pages(ctx, count); err != nil {
				t.Fatal(err)
			}
			if pages != 6 {
				t.Fatalf("%d pages, want 6", pages)
			}
			if m.granular {
				r.check(map[string]int64{youtube.Search: 6})
			} else {
				r.check(map[string]int64{youtube.Pool: 600})
			}
		})
	}
}

// TestChunkedVideoUpload: a 3 MiB video uploaded by Google's client in
// 256 KiB chunks (POSTs to the session URI with X-GUploader-No-308) is one
// videos.insert call, charged once; its chunks ask nothing of Redis.
func TestChunkedVideoUpload(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			const size = 3 << 20
			progress := 0
			v, err := r.svc.Videos.Insert([]string{"snippet", "status"}, &yt.Video{
				Snippet: &yt.VideoSnippet{Title: "Holiday", CategoryId: "22"},
				Status:  &yt.VideoStatus{PrivacyStatus: "private"},
			}).Media(bytes.NewReader(make([]byte, size)), googleapi.ChunkSize(chunkSize), googleapi.ContentType("video/mp4")).
				ProgressUpdater(func(current, total int64) { progress++ }).Do()
			if err != nil {
				t.Fatal(err)
			}
			if v.Id == "" || v.Snippet == nil || v.Snippet.Title != "Holiday" {
				t.Errorf("the uploaded video: %+v, want the resource sent back with an id", v)
			}
			calls, chunks := r.requests("videos.insert")
			charged, free := r.chargedDecisions()
			// 12 chunks of 256 KiB, then the empty last request the Go
			// client sends when the file is a whole number of chunks.
			if calls != 1 || chunks != 13 || charged != 1 || free != 13 {
				t.Errorf("%d call(s) and %d chunk request(s) arrived; tollgate charged %d and let %d through free; want 1, 13, 1, 13",
					calls, chunks, charged, free)
			}
			t.Logf("one upload of %d bytes: %d session-opening call, %d chunk requests, %d progress reports", size, calls, chunks, progress)
			if m.granular {
				r.check(map[string]int64{youtube.Upload: 1})
			} else {
				r.check(map[string]int64{youtube.Pool: 100})
			}
		})
	}
}

// TestPutChunks: the protocol guide's form of a resumable upload (PUT
// chunks to the session URI, a status query, 308 answers), sent by hand
// through the Transport, is charged once too.
func TestPutChunks(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			const size = 3<<20 + 1000
			do := func(verb, url string, h http.Header, body []byte) (*http.Response, string) {
				t.Helper()
				req, err := http.NewRequest(verb, url, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header = h
				resp, err := r.tr.RoundTrip(req) // 308 is an answer, not a redirect
				if err != nil {
					t.Fatalf("%s %s: %v", verb, url, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, string(b)
			}
			resp, body := do("POST", r.root+"/upload/youtube/v3/videos?part=snippet,status&uploadType=resumable", http.Header{
				"Content-Type":            {"application/json; charset=UTF-8"},
				"X-Upload-Content-Length": {fmt.Sprint(size)},
				"X-Upload-Content-Type":   {"video/mp4"},
			}, []byte(`{"snippet":{"title":"Holiday"},"status":{"privacyStatus":"private"}}`))
			session := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusOK || session == "" {
				t.Fatalf("opening the session: %d %s", resp.StatusCode, body)
			}
			for off := 0; off < size; off += chunkSize {
				n := min(chunkSize, size-off)
				resp, body := do("PUT", session, http.Header{"Content-Range": {fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size)}}, make([]byte, n))
				last := off+n == size
				switch {
				case last && (resp.StatusCode != http.StatusOK || !strings.Contains(body, `"youtube#video"`)):
					t.Fatalf("last chunk: %d %s, want 200 and the video", resp.StatusCode, body)
				case !last && resp.StatusCode != http.StatusPermanentRedirect:
					t.Fatalf("chunk at %d: %d %s, want 308", off, resp.StatusCode, body)
				}
				if off == 5*chunkSize { // after an interruption: where are we?
					resp, _ := do("PUT", session, http.Header{"Content-Range": {fmt.Sprintf("bytes */%d", size)}}, nil)
					if want := fmt.Sprintf("bytes=0-%d", off+n-1); resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Range") != want {
						t.Fatalf("status query: %d Range %q, want 308 and %q", resp.StatusCode, resp.Header.Get("Range"), want)
					}
				}
			}
			calls, chunks := r.requests("videos.insert")
			if calls != 1 || chunks != 14 {
				t.Errorf("%d call(s), %d requests to the session; want 1 and 14 (13 chunks, a status query)", calls, chunks)
			}
			if m.granular {
				r.check(map[string]int64{youtube.Upload: 1})
			} else {
				r.check(map[string]int64{youtube.Pool: 100})
			}
		})
	}
}

// TestCaptionUploads: a caption track uploaded in one request, one
// uploaded in chunks, and one replaced in chunks (captions.update opens
// its session with a PUT; Google's client sends the chunks by POST) are
// each charged once, at the captions' prices in both models.
func TestCaptionUploads(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			srt := "1\n00:00:00,000 --> 00:00:02,000\nHello.\n"
			track := &yt.Caption{Snippet: &yt.CaptionSnippet{VideoId: "some-video", Language: "en", Name: "English"}}
			c, err := r.svc.Captions.Insert([]string{"snippet"}, track).Media(strings.NewReader(srt), googleapi.ContentType("application/x-subrip")).Do()
			if err != nil {
				t.Fatal(err)
			}
			long := strings.Repeat(srt, (600<<10)/len(srt))
			if _, err := r.svc.Captions.Insert([]string{"snippet"}, track).
				Media(strings.NewReader(long), googleapi.ChunkSize(chunkSize), googleapi.ContentType("application/x-subrip")).Do(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Captions.Update([]string{"snippet"}, &yt.Caption{Id: c.Id}).
				Media(strings.NewReader(long), googleapi.ChunkSize(chunkSize), googleapi.ContentType("application/x-subrip")).Do(); err != nil {
				t.Fatal(err)
			}
			inserts, insertChunks := r.requests("captions.insert")
			updates, updateChunks := r.requests("captions.update")
			if inserts != 2 || updates != 1 || insertChunks != 3 || updateChunks != 3 {
				t.Errorf("captions.insert: %d calls, %d chunk requests; captions.update: %d, %d; want 2, 3, 1, 3",
					inserts, insertChunks, updates, updateChunks)
			}
			r.check(map[string]int64{youtube.Pool: 400 + 400 + 450})
		})
	}
}

// TestThumbnailSet: a thumbnail set in one request and one set in chunks
// are each charged once, 50 units.
func TestThumbnailSet(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{})
			jpeg := append([]byte{0xff, 0xd8, 0xff, 0xe0}, make([]byte, 40<<10)...)
			res, err := r.svc.Thumbnails.Set("some-video").Media(bytes.NewReader(jpeg), googleapi.ContentType("image/jpeg")).Do()
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind != "youtube#thumbnailSetResponse" {
				t.Errorf("answer kind %q, want youtube#thumbnailSetResponse", res.Kind)
			}
			big := append([]byte{0xff, 0xd8, 0xff, 0xe0}, make([]byte, 1<<20)...)
			if _, err := r.svc.Thumbnails.Set("some-video").Media(bytes.NewReader(big), googleapi.ChunkSize(chunkSize), googleapi.ContentType("image/jpeg")).Do(); err != nil {
				t.Fatal(err)
			}
			if calls, chunks := r.requests("thumbnails.set"); calls != 2 || chunks != 5 {
				t.Errorf("%d calls, %d chunk requests; want 2 and 5", calls, chunks)
			}
			r.check(map[string]int64{youtube.Pool: 100})
		})
	}
}

// TestOAuthUpload: an upload authorized by an OAuth token alone (the
// oauth2 transport above tollgate, no API key anywhere) spends the pool of
// the token's project, and is charged once.
func TestOAuthUpload(t *testing.T) {
	const token = "ya29.channel-token"
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t, m.granular, rigOptions{token: token, wrap: func(base http.RoundTripper) http.RoundTripper {
				return &oauth2.Transport{Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}), Base: base}
			}})
			if _, err := r.svc.Videos.Insert([]string{"snippet"}, &yt.Video{Snippet: &yt.VideoSnippet{Title: "Holiday"}}).
				Media(bytes.NewReader(make([]byte, 1<<20+7)), googleapi.ChunkSize(chunkSize)).Do(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Videos.List([]string{"snippet"}).Id("some-video").Do(); err != nil {
				t.Fatal(err)
			}
			for _, a := range r.sim.Arrivals() {
				if a.Project != token {
					t.Errorf("an arrival charged to %q, want the token's project: %+v", a.Project, a)
				}
			}
			if m.granular {
				r.check(map[string]int64{youtube.Upload: 1, youtube.Pool: 1})
			} else {
				r.check(map[string]int64{youtube.Pool: 101})
			}
		})
	}
}
