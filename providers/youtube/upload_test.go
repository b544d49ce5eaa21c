package youtube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/quota/embedded"
)

// simAPI is the simulated API on loopback.
type simAPI struct {
	*ytsim.Server
	root string // e.g. http://127.0.0.1:1234
	host string // e.g. 127.0.0.1:1234
}

func startSim(t *testing.T, cfg ytsim.Config) *simAPI {
	t.Helper()
	sim := ytsim.New(cfg)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	return &simAPI{Server: sim, root: ts.URL, host: u.Host}
}

// simTransport meters the simulated API with the classic table, an
// hour-long window and no reserve, on rdb (nil for an in-process Redis).
func simTransport(t *testing.T, api *simAPI, keys []string, rdb redis.UniversalClient, opts Options) *Transport {
	t.Helper()
	if len(opts.Table.Rules) == 0 {
		opts.Table = Classic(api.host)
	}
	if opts.Window == 0 {
		opts.Window = time.Hour
	}
	opts.ReservePercent = -1
	if opts.Tollgate.Policy == nil {
		opts.Tollgate.Policy = tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)
	}
	tr, err := NewTransport(keys, rdb, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// send sends one request through rt with an OAuth token (none when "")
// and returns the answer, its body read.
func send(t *testing.T, rt http.RoundTripper, verb, rawURL, token string, header http.Header, body []byte) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(verb, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, nil
}

// openUpload opens a resumable video upload and returns the session URI.
func openUpload(t *testing.T, rt http.RoundTripper, api *simAPI, token string) (string, error) {
	t.Helper()
	resp, body, err := send(t, rt, "POST", api.root+"/upload/youtube/v3/videos?part=snippet&uploadType=resumable", token,
		http.Header{"Content-Type": {"application/json"}, "X-Upload-Content-Type": {"video/mp4"}}, []byte(`{"snippet":{"title":"Holiday"}}`))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") == "" {
		t.Fatalf("opening an upload: %d %s, want 200 and a session URI", resp.StatusCode, body)
	}
	return resp.Header.Get("Location"), nil
}

// chunk sends n bytes at off to a session by PUT, as the protocol guide
// does; total is "*" until the last chunk.
func chunk(t *testing.T, rt http.RoundTripper, uri, token string, off, n int, total string) *http.Response {
	t.Helper()
	h := http.Header{"Content-Range": {fmt.Sprintf("bytes %d-%d/%s", off, off+n-1, total)}}
	resp, body, err := send(t, rt, "PUT", uri, token, h, bytes.Repeat([]byte{'v'}, n))
	if err != nil {
		t.Fatalf("chunk at %d: %v", off, err)
	}
	if resp.StatusCode != http.StatusPermanentRedirect && resp.StatusCode != http.StatusOK {
		t.Fatalf("chunk at %d: %d %s", off, resp.StatusCode, body)
	}
	return resp
}

// arrivals counts the simulator's arrivals of method, chunks apart.
func arrivals(api *simAPI, method string) (calls, chunks int) {
	for _, a := range api.Arrivals() {
		if a.Method != method {
			continue
		}
		if a.Chunk {
			chunks++
		} else {
			calls++
		}
	}
	return calls, chunks
}

// TestUploadChargedOnce: a video uploaded in chunks by PUT, with a status
// query on the way, is one call: charged once, by tollgate as by the
// simulator, and its chunks ask nothing of Redis.
func TestUploadChargedOnce(t *testing.T) {
	for _, granular := range []bool{false, true} {
		api := startSim(t, ytsim.Config{Granular: granular})
		table, bucket, units := Classic(api.host), Pool, int64(100)
		if granular {
			table, bucket, units = Granular(api.host), Upload, 1
		}
		var mu sync.Mutex
		var decisions []tollgate.Decision
		tr := simTransport(t, api, []string{"K"}, nil, Options{Table: table, Tollgate: tollgate.Config{
			Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
				mu.Lock()
				defer mu.Unlock()
				decisions = append(decisions, d)
			}}}})
		uri, err := openUpload(t, tr, api, "")
		if err != nil {
			t.Fatal(err)
		}
		const size, step = 3*256<<10 + 100, 256 << 10
		for off := 0; off < size; off += step {
			n, total := min(step, size-off), "*"
			if off+n == size {
				total = fmt.Sprint(size)
			}
			chunk(t, tr, uri, "", off, n, total)
			if off == step { // where are we?
				resp, _, err := send(t, tr, "PUT", uri, "", http.Header{"Content-Range": {fmt.Sprintf("bytes */%d", size)}}, nil)
				if err != nil || resp.StatusCode != http.StatusPermanentRedirect {
					t.Fatalf("status query: %v %v, want 308", resp, err)
				}
			}
		}
		used, err := tr.Usage(context.Background(), DefaultProject, bucket)
		if err != nil {
			t.Fatal(err)
		}
		sim := api.BucketStats(bucket)["K"]
		calls, chunks := arrivals(api, "videos.insert")
		if used[0].Used != units || sim.Units != units || calls != 1 || chunks != 5 {
			t.Errorf("granular=%v: tollgate counts %d %s units, the simulator charged %d in %d call(s) and %d chunk(s); want %d, one call, 4 chunks and a status query",
				granular, used[0].Used, bucket, sim.Units, calls, chunks, units)
		}
		mu.Lock()
		for i, d := range decisions {
			if (i == 0) == d.Free || i > 0 && (d.Endpoint != "videos.upload" || len(d.Charges) != 0) {
				t.Errorf("decision %d: %+v, want the call charged and the rest free videos.upload requests", i, d)
			}
		}
		mu.Unlock()
	}
}

// TestChunksGoOnWhileTheProjectIsPaused: the chunks of an upload already
// paid for are never paused, when new calls are.
func TestChunksGoOnWhileTheProjectIsPaused(t *testing.T) {
	api := startSim(t, ytsim.Config{})
	tr := simTransport(t, api, []string{"K"}, nil, Options{})
	uri, err := openUpload(t, tr, api, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Pause(context.Background(), DefaultProject, "", time.Hour); err != nil {
		t.Fatal(err)
	}
	var qe *tollgate.QuotaError
	if _, _, err := send(t, tr, "GET", api.root+"/youtube/v3/videos?part=id&id=a", "", nil, nil); !errors.As(err, &qe) {
		t.Fatalf("a call while the project is paused: %v, want a *QuotaError", err)
	}
	if _, err := openUpload(t, tr, api, ""); !errors.As(err, &qe) {
		t.Fatalf("a new upload while the project is paused: %v, want a *QuotaError", err)
	}
	if resp := chunk(t, tr, uri, "", 0, 1000, "1000"); resp.StatusCode != http.StatusOK {
		t.Errorf("the last chunk of the upload paid for: %d, want 200", resp.StatusCode)
	}
}

// TestOAuthAloneUploads: requests authorized by an OAuth token alone
// spend the only pool, or Options.TokenProject; with several pools and no
// TokenProject they fail, naming the option.
func TestOAuthAloneUploads(t *testing.T) {
	cases := []struct {
		name  string
		keys  []string
		pools map[string][]string
		token string // the TokenProject
		scope string // "" for a failure
	}{
		{"no keys at all", nil, nil, "", DefaultProject},
		{"keys of one project", []string{"K"}, nil, "", DefaultProject},
		{"two projects, TokenProject", nil, map[string][]string{"a": {"KA"}, "b": {"KB"}}, "b", "b"},
		{"two projects", nil, map[string][]string{"a": {"KA"}, "b": {"KB"}}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api := startSim(t, ytsim.Config{})
			tr := simTransport(t, api, c.keys, nil, Options{Projects: c.pools, TokenProject: c.token})
			uri, err := openUpload(t, tr, api, "oauth-token")
			if c.scope == "" {
				if err == nil || !strings.Contains(err.Error(), "TokenProject") {
					t.Fatalf("upload: %v, want an error naming Options.TokenProject", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			chunk(t, tr, uri, "oauth-token", 0, 10, "10")
			used, err := tr.Usage(context.Background(), c.scope, Pool)
			if err != nil {
				t.Fatal(err)
			}
			// The simulator names a project by the credential it is given.
			if sim := api.Stats()["oauth-token"]; used[0].Used != 100 || sim.Units != 100 {
				t.Errorf("scope %s counts %d units, the simulator charged the token's project %d; want 100 each", c.scope, used[0].Used, sim.Units)
			}
		})
	}
}

// TestUploadLimitPausesTheCredential: YouTube's 400 uploadLimitExceeded
// pauses the video uploads of the credential that met it, in this process
// and in every process sharing the Redis, and nothing else: not another
// credential's uploads, not the same credential's other calls, not the
// chunks of an upload it opened before.
func TestUploadLimitPausesTheCredential(t *testing.T) {
	api := startSim(t, ytsim.Config{})
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	tr := simTransport(t, api, nil, rdb, Options{})
	other := simTransport(t, api, nil, rdb, Options{}) // another process
	scope := "uploads-" + tollgate.HashCredential("token-A")

	open, err := openUpload(t, tr, api, "token-A")
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Inject("videos.insert", ytsim.UploadLimitExceeded); err != nil {
		t.Fatal(err)
	}
	_, err = openUpload(t, tr, api, "token-A")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Scope != scope || qe.Bucket != "" || qe.Endpoint != "videos.insert" || qe.RetryAfter != time.Hour {
		t.Fatalf("an upload answered uploadLimitExceeded: %#v, want a *QuotaError from the upstream for %s, for the Window", err, scope)
	}
	if strings.Contains(err.Error(), "token-A") {
		t.Errorf("the error %q shows the token", err)
	}
	calls, _ := arrivals(api, "videos.insert")

	for _, c := range []struct {
		name string
		tr   *Transport
	}{{"this process", tr}, {"another process", other}} {
		_, err := openUpload(t, c.tr, api, "token-A")
		if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Scope != scope || qe.RetryAfter <= 0 || qe.RetryAfter > time.Hour {
			t.Errorf("%s: the next upload of token-A: %v, want a *QuotaError for %s", c.name, err, scope)
		}
	}
	if now, _ := arrivals(api, "videos.insert"); now != calls {
		t.Errorf("the simulator got %d more videos.insert calls, want none", now-calls)
	}
	if _, err := openUpload(t, tr, api, "token-B"); err != nil {
		t.Errorf("another credential's upload: %v", err)
	}
	for _, call := range []struct{ verb, path string }{
		{"GET", "/youtube/v3/videos?part=id&id=a"},
		{"POST", "/upload/youtube/v3/thumbnails/set?videoId=a&uploadType=media"},
	} {
		if _, _, err := send(t, tr, call.verb, api.root+call.path, "token-A", nil, []byte("x")); err != nil {
			t.Errorf("token-A %s %s: %v", call.verb, call.path, err)
		}
	}
	if resp := chunk(t, tr, open, "token-A", 0, 10, "10"); resp.StatusCode != http.StatusOK {
		t.Errorf("the upload token-A opened before: %d, want 200", resp.StatusCode)
	}
	// The pause ends: here, with this process's clock moved past it, Redis
	// still says it holds (on its own clock) and is believed.
	tr.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := openUpload(t, tr, api, "token-A"); !errors.As(err, &qe) {
		t.Errorf("with the local memory past the pause but Redis not: %v, want a *QuotaError", err)
	}
}

// TestUploadLimitPauseEnds: once the pause is over, the credential
// uploads again.
func TestUploadLimitPauseEnds(t *testing.T) {
	api := startSim(t, ytsim.Config{})
	const window = 300 * time.Millisecond // the pause, in this test
	tr := simTransport(t, api, nil, nil, Options{Window: window})
	if err := api.Inject("videos.insert", ytsim.UploadLimitExceeded); err != nil {
		t.Fatal(err)
	}
	var qe *tollgate.QuotaError
	if _, err := openUpload(t, tr, api, "token-A"); !errors.As(err, &qe) || qe.RetryAfter != window {
		t.Fatalf("uploadLimitExceeded: %v, want a *QuotaError for %v", err, window)
	}
	time.Sleep(window + 50*time.Millisecond) // the pause is in Redis, on its clock
	if _, err := openUpload(t, tr, api, "token-A"); err != nil {
		t.Errorf("after the pause: %v", err)
	}
}
