package youtube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// discoveryMethod is one method of the discovery document, as the
// simulator's test data lists it.
type discoveryMethod struct {
	id, verb, path string
	media          bool // it takes a file, on the upload paths too
}

// endpoint is the name the cost tables give the method.
func (d discoveryMethod) endpoint() string {
	if d.id == "youtube.youtube.v3.liveChat.messages.stream" {
		return "liveChatMessages.streamList"
	}
	return strings.TrimPrefix(d.id, "youtube.")
}

// simName is the name the simulator records its calls under.
func (d discoveryMethod) simName() string { return strings.TrimPrefix(d.id, "youtube.") }

// readDiscovery reads the method list of the discovery document of
// google.golang.org/api v0.309.0, committed with the simulator.
func readDiscovery(t *testing.T) []discoveryMethod {
	t.Helper()
	f, err := os.Open("../../internal/ytsim/testdata/discovery-methods.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []discoveryMethod
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 5 {
			t.Fatalf("discovery-methods.tsv:%d: %d columns, want 5", line, len(cols))
		}
		if line > 1 {
			out = append(out, discoveryMethod{id: cols[0], verb: cols[1], path: cols[2], media: cols[3] != ""})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 83 {
		t.Fatalf("%d methods in the discovery list, want 83", len(out))
	}
	return out
}

// request builds a request for a path, filling its {parameters}.
func request(t *testing.T, verb, rawURL string) *http.Request {
	t.Helper()
	rawURL = strings.ReplaceAll(rawURL, "{id}", "some-id")
	req, err := http.NewRequest(verb, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// want is what a request resolves to.
type want struct {
	name      string
	charge    costs.Charge // zero for a continuation
	continues bool
}

func (w want) String() string {
	if w.continues {
		return w.name + " (continues)"
	}
	return fmt.Sprintf("%s %v", w.name, w.charge)
}

func got(e costs.Endpoint) want {
	w := want{name: e.Name, continues: e.Continues}
	if len(e.Charges) == 1 {
		w.charge = e.Charges[0]
	} else if len(e.Charges) > 1 {
		w.name += fmt.Sprintf(" (%d charges)", len(e.Charges))
	}
	if e.Free && !e.Continues {
		w.name += " (free)"
	}
	return w
}

// TestEveryDiscoveryMethodResolves: every method of the discovery
// document resolves, in both tables and on both hosts, to its own
// endpoint, charged one bucket; the methods that take a file do on their
// upload paths too, and requests to their upload sessions continue them.
func TestEveryDiscoveryMethodResolves(t *testing.T) {
	tables := map[string]costs.Spec{"classic": Classic(), "granular": Granular()}
	for model, spec := range tables {
		tab, err := costs.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range readDiscovery(t) {
			for _, host := range DefaultHosts {
				paths := []string{d.path}
				if d.media {
					paths = append(paths, "/upload"+d.path, "/resumable/upload"+d.path)
				}
				for _, p := range paths {
					req := request(t, d.verb, "https://"+host+p+"?part=snippet")
					e, err := tab.Resolve(req)
					if err != nil {
						t.Errorf("%s: %s %s: %v", model, d.verb, req.URL, err)
						continue
					}
					if g := got(e); g.name != d.endpoint() || g.continues || g.charge.Units <= 0 {
						t.Errorf("%s: %s %s = %v, want %s, charged", model, d.verb, req.URL, g, d.endpoint())
					}
				}
			}
		}
	}
}

// TestUploadRequests: on the upload paths, the request that opens a
// session and the simple and multipart uploads are calls, charged once;
// the chunks and status queries sent to the session URI, by PUT (the
// protocol guide) or POST (Google's Go client), continue the call.
func TestUploadRequests(t *testing.T) {
	classic, err := costs.New(Classic())
	if err != nil {
		t.Fatal(err)
	}
	granular, err := costs.New(Granular())
	if err != nil {
		t.Fatal(err)
	}
	const api = "https://youtube.googleapis.com"
	session := "?uploadType=resumable&upload_id=AUxyz"
	cases := []struct {
		verb, url      string
		classic, gran  want
		unknownInTable bool
	}{
		{"POST", api + "/upload/youtube/v3/videos?part=snippet&uploadType=resumable",
			want{name: "videos.insert", charge: costs.Charge{Bucket: Pool, Units: 100}},
			want{name: "videos.insert", charge: costs.Charge{Bucket: Upload, Units: 1}}, false},
		{"POST", api + "/upload/youtube/v3/videos?part=snippet&uploadType=multipart",
			want{name: "videos.insert", charge: costs.Charge{Bucket: Pool, Units: 100}},
			want{name: "videos.insert", charge: costs.Charge{Bucket: Upload, Units: 1}}, false},
		{"POST", api + "/resumable/upload/youtube/v3/videos?part=snippet&uploadType=resumable",
			want{name: "videos.insert", charge: costs.Charge{Bucket: Pool, Units: 100}},
			want{name: "videos.insert", charge: costs.Charge{Bucket: Upload, Units: 1}}, false},
		{"POST", api + "/upload/youtube/v3/videos" + session,
			want{name: "videos.upload", continues: true}, want{name: "videos.upload", continues: true}, false},
		{"PUT", api + "/upload/youtube/v3/videos" + session,
			want{name: "videos.upload", continues: true}, want{name: "videos.upload", continues: true}, false},
		{"PUT", api + "/resumable/upload/youtube/v3/videos" + session,
			want{name: "videos.upload", continues: true}, want{name: "videos.upload", continues: true}, false},
		// videos.insert has no PUT: only its sessions take one.
		{"PUT", api + "/upload/youtube/v3/videos?uploadType=resumable", want{}, want{}, true},
		{"POST", api + "/upload/youtube/v3/captions?part=snippet&uploadType=resumable",
			want{name: "captions.insert", charge: costs.Charge{Bucket: Pool, Units: 400}},
			want{name: "captions.insert", charge: costs.Charge{Bucket: Pool, Units: 400}}, false},
		{"PUT", api + "/upload/youtube/v3/captions?part=snippet&uploadType=resumable",
			want{name: "captions.update", charge: costs.Charge{Bucket: Pool, Units: 450}},
			want{name: "captions.update", charge: costs.Charge{Bucket: Pool, Units: 450}}, false},
		// Google's Go client sends captions.update's chunks by POST.
		{"POST", api + "/upload/youtube/v3/captions" + session,
			want{name: "captions.upload", continues: true}, want{name: "captions.upload", continues: true}, false},
		{"PUT", api + "/upload/youtube/v3/captions" + session,
			want{name: "captions.upload", continues: true}, want{name: "captions.upload", continues: true}, false},
		{"POST", api + "/upload/youtube/v3/thumbnails/set?videoId=v&uploadType=media",
			want{name: "thumbnails.set", charge: costs.Charge{Bucket: Pool, Units: 50}},
			want{name: "thumbnails.set", charge: costs.Charge{Bucket: Pool, Units: 50}}, false},
		{"PUT", "https://www.googleapis.com/upload/youtube/v3/thumbnails/set" + session,
			want{name: "thumbnails.upload", continues: true}, want{name: "thumbnails.upload", continues: true}, false},
		{"POST", api + "/upload/youtube/v3/channelBanners/insert" + session,
			want{name: "channelBanners.upload", continues: true}, want{name: "channelBanners.upload", continues: true}, false},
		{"PUT", api + "/upload/youtube/v3/watermarks/set" + session,
			want{name: "watermarks.upload", continues: true}, want{name: "watermarks.upload", continues: true}, false},
		{"PUT", api + "/upload/youtube/v3/playlistImages" + session,
			want{name: "playlistImages.upload", continues: true}, want{name: "playlistImages.upload", continues: true}, false},
		// An empty upload_id names no session.
		{"POST", api + "/upload/youtube/v3/videos?uploadType=resumable&upload_id=",
			want{name: "videos.insert", charge: costs.Charge{Bucket: Pool, Units: 100}},
			want{name: "videos.insert", charge: costs.Charge{Bucket: Upload, Units: 1}}, false},
		// Not an upload path: upload_id means nothing there.
		{"POST", api + "/youtube/v3/videos?upload_id=x",
			want{name: "videos.insert", charge: costs.Charge{Bucket: Pool, Units: 100}},
			want{name: "videos.insert", charge: costs.Charge{Bucket: Upload, Units: 1}}, false},
	}
	for _, c := range cases {
		for _, m := range []struct {
			name string
			tab  *costs.Table
			want want
		}{{"classic", classic, c.classic}, {"granular", granular, c.gran}} {
			e, err := m.tab.Resolve(request(t, c.verb, c.url))
			if c.unknownInTable {
				if !errors.Is(err, costs.ErrUnknownEndpoint) {
					t.Errorf("%s: %s %s = %v, %v; want costs.ErrUnknownEndpoint", m.name, c.verb, c.url, got(e), err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s %s: %v", m.name, c.verb, c.url, err)
				continue
			}
			if g := got(e); g != m.want {
				t.Errorf("%s: %s %s = %v, want %v", m.name, c.verb, c.url, g, m.want)
			}
		}
	}
}

// TestDatedPrices: the classic table charges what Google bills since
// 2025-12-04; the old price is one Override away, and an overridden table
// given to NewTransport still tells chunks from calls.
func TestDatedPrices(t *testing.T) {
	classic, err := costs.New(Classic())
	if err != nil {
		t.Fatal(err)
	}
	insert := request(t, "POST", "https://youtube.googleapis.com/upload/youtube/v3/videos?uploadType=resumable")
	if e, err := classic.Resolve(insert); err != nil || e.Units() != 100 {
		t.Errorf("classic videos.insert = %d units (%v), want 100", e.Units(), err)
	}
	if e, err := classic.Resolve(request(t, "GET", "https://youtube.googleapis.com/youtube/v3/videos:batchGetStats?id=a")); err != nil ||
		len(e.Charges) != 1 || e.Charges[0] != (costs.Charge{Bucket: BatchGetStats, Units: 1}) {
		t.Errorf("classic videos.batchGetStats = %v (%v), want 1 unit of %s, not the pool", e.Charges, err, BatchGetStats)
	}

	old, err := Classic().Override("videos.insert", costs.Charge{Bucket: Pool, Units: 1600})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransport([]string{"K"}, nil, &Options{Table: old})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if e, err := tr.costs.Resolve(insert); err != nil || e.Units() != 1600 {
		t.Errorf("overridden videos.insert = %d units (%v), want 1600", e.Units(), err)
	}
	chunk := request(t, "PUT", "https://youtube.googleapis.com/upload/youtube/v3/videos?uploadType=resumable&upload_id=x")
	if e, err := tr.costs.Resolve(chunk); err != nil || !e.Continues {
		t.Errorf("a chunk after the override = %v (%v), want a continuation", got(e), err)
	}
}

// TestPricesAgreeWithTheSimulator sends every method of the discovery
// document, in both models, through a Transport to the simulated API:
// each call is charged by the Transport exactly what the simulator
// charged it, bucket and units, method by method; on the upload paths too.
func TestPricesAgreeWithTheSimulator(t *testing.T) {
	for _, granular := range []bool{false, true} {
		model := map[bool]string{false: "classic", true: "granular"}[granular]
		t.Run(model, func(t *testing.T) {
			sim := ytsim.New(ytsim.Config{Granular: granular, Quota: 1 << 40, SearchQuota: 1 << 40,
				UploadQuota: 1 << 40, BatchStatsQuota: 1 << 40})
			api := httptest.NewServer(sim)
			defer api.Close()
			u, _ := url.Parse(api.URL)
			table := Classic(u.Host)
			if granular {
				table = Granular(u.Host)
			}
			var mu sync.Mutex
			var last tollgate.Decision
			tr, err := NewTransport([]string{"K"}, nil, &Options{
				Table: table, Window: time.Hour, ReservePercent: -1,
				Quota: 1 << 40, SearchQuota: 1 << 40, UploadQuota: 1 << 40, BatchStatsQuota: 1 << 40,
				Tollgate: tollgate.Config{Trace: tollgate.Trace{Decided: func(_ context.Context, d tollgate.Decision) {
					mu.Lock()
					defer mu.Unlock()
					last = d
				}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for _, d := range readDiscovery(t) {
				paths := []string{d.path}
				if d.media {
					paths = append(paths, "/upload"+d.path+"?uploadType=media", "/resumable/upload"+d.path+"?uploadType=resumable")
				}
				for _, p := range paths {
					req := request(t, d.verb, api.URL+p)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Errorf("%s %s: %v", d.verb, p, err)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					arrivals := sim.Arrivals()
					a := arrivals[len(arrivals)-1]
					mu.Lock()
					dec := last
					mu.Unlock()
					simSaw := fmt.Sprintf("%s %v", a.Method, []costs.Charge{{Bucket: a.Bucket, Units: a.Units}})
					tollgateSaw := fmt.Sprintf("%s %v", d.simName(), dec.Charges)
					if dec.Endpoint != d.endpoint() || tollgateSaw != simSaw {
						t.Errorf("%s %s: tollgate charged %s %v, the simulator %s", d.verb, p, dec.Endpoint, dec.Charges, simSaw)
					}
				}
			}
			// And in total, bucket by bucket.
			for _, b := range []string{Pool, Search, Upload, BatchGetStats} {
				want := sim.BucketStats(b)["K"].Units
				usage, err := tr.Usage(context.Background(), DefaultProject, b)
				if err != nil {
					if want != 0 || granular || b == Pool || b == BatchGetStats {
						t.Errorf("usage of %s: %v", b, err)
					}
					continue
				}
				if usage[0].Used != want {
					t.Errorf("bucket %s: tollgate counts %d units, the simulator charged %d", b, usage[0].Used, want)
				}
			}
		})
	}
}

// TestEveryRuleNamesAMethod: each table names every method of the
// discovery document, and nothing else but the upload sessions.
func TestEveryRuleNamesAMethod(t *testing.T) {
	known := map[string]bool{}
	for _, d := range readDiscovery(t) {
		known[d.endpoint()] = true
	}
	sessions := map[string]bool{}
	for _, d := range readDiscovery(t) {
		if d.media {
			sessions[sessionEndpoint(d.path)] = true
		}
	}
	if len(sessions) != 6 {
		t.Errorf("%d upload session names, want 6 (one per upload path): %v", len(sessions), sessions)
	}
	for model, spec := range map[string]costs.Spec{"classic": Classic(), "granular": Granular()} {
		named := map[string]bool{}
		for _, r := range spec.Rules {
			named[r.Endpoint] = true
			if !known[r.Endpoint] && !sessions[r.Endpoint] {
				t.Errorf("%s: rule %q is named %s, no method of the API", model, r.Pattern, r.Endpoint)
			}
		}
		for name := range known {
			if !named[name] {
				t.Errorf("%s: no rule is named %s", model, name)
			}
		}
	}
}

func TestOtherHostsAndOverrides(t *testing.T) {
	spec := Classic("127.0.0.1:8080")
	spec, err := spec.Override("search.list", costs.Charge{Bucket: Pool, Units: 1})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := costs.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, "GET", "http://127.0.0.1:8080/youtube/v3/search?q=x")
	if e, err := tab.Resolve(req); err != nil || e.Units() != 1 {
		t.Errorf("overridden search.list on a custom host = %d units (%v), want 1", e.Units(), err)
	}
	req = request(t, "GET", "https://youtube.googleapis.com/youtube/v3/videos")
	if _, err := tab.Resolve(req); err == nil {
		t.Error("a table for one host matched another")
	}
}
