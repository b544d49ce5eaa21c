package youtube

import (
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
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// fakeYouTube records the key each request carried and answers with respond.
type fakeYouTube struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []string
	queries []string
	respond func(w http.ResponseWriter)
}

func newFake(t *testing.T) *fakeYouTube {
	f := &fakeYouTube{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.keys = append(f.keys, r.Header.Get("X-Goog-Api-Key"))
		f.queries = append(f.queries, r.URL.RawQuery)
		respond := f.respond
		f.mu.Unlock()
		if respond != nil {
			respond(w)
			return
		}
		io.WriteString(w, `{"kind":"youtube#videoListResponse","items":[]}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeYouTube) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys)
}

// newTestTransport meters the fake's host with the classic table and an
// hour-long window, no reserve.
func newTestTransport(t *testing.T, f *fakeYouTube, keys []string, opts Options) *Transport {
	t.Helper()
	u, _ := url.Parse(f.URL)
	if len(opts.Table.Rules) == 0 {
		opts.Table = Classic(u.Host)
	}
	if opts.Window == 0 {
		opts.Window = time.Hour
	}
	if opts.ReservePercent == 0 {
		opts.ReservePercent = -1
	}
	tr, err := NewTransport(keys, nil, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func call(t *testing.T, tr http.RoundTripper, rawURL string) error {
	t.Helper()
	req, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

func TestKeySentInHeaderNotURL(t *testing.T) {
	f := newFake(t)
	tr := newTestTransport(t, f, []string{"KEY-ONE", "KEY-TWO"}, Options{})
	req, _ := http.NewRequest("GET", f.URL+"/youtube/v3/videos?part=snippet&chart=mostPopular", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f.keys[0] != "KEY-ONE" || strings.Contains(f.queries[0], "KEY") {
		t.Errorf("upstream got key header %q and query %q, want the first key in the header only", f.keys[0], f.queries[0])
	}
	if req.Header.Get("X-Goog-Api-Key") != "" {
		t.Error("the caller's request was changed")
	}
}

func TestKeysOfOneProjectShareItsQuota(t *testing.T) {
	f := newFake(t)
	tr := newTestTransport(t, f, nil, Options{
		Projects: map[string][]string{"project-a": {"A1", "A2"}, "project-b": {"B1"}},
		Quota:    250,
		Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)},
	})
	search := f.URL + "/youtube/v3/search?part=snippet&q=go&key="
	for _, k := range []string{"A1", "A2"} {
		if err := call(t, tr, search+k); err != nil {
			t.Fatalf("search with %s: %v", k, err)
		}
	}
	err := call(t, tr, search+"A1")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Scope != "project-a" {
		t.Fatalf("third search in project-a: %v, want a *QuotaError for project-a (two keys, one quota)", err)
	}
	if err := call(t, tr, search+"B1"); err != nil {
		t.Errorf("project-b has its own quota: %v", err)
	}
	err = call(t, tr, search+"UNKNOWN-KEY-123")
	if err == nil || strings.Contains(err.Error(), "UNKNOWN-KEY-123") {
		t.Errorf("a key in no pool: %v, want an error that does not show the key", err)
	}
}

func TestFailoverToAnotherProject(t *testing.T) {
	f := newFake(t)
	tr := newTestTransport(t, f, nil, Options{
		Projects: map[string][]string{"project-a": {"A1"}, "project-b": {"B1"}},
		Quota:    100,
		Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.Refuse}, nil)},
	})
	search := f.URL + "/youtube/v3/search?part=snippet&q=go&key=A1"
	for range 2 {
		if err := call(t, tr, search); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(f.keys, ","); got != ",B1" {
		t.Errorf("header keys = %q, want the first call with its own URL key, the second failed over to B1", got)
	}
	if strings.Contains(f.queries[1], "A1") {
		t.Errorf("the failover request still carried project-a's key: %q", f.queries[1])
	}
	if err := call(t, tr, search); !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("both projects spent: %v, want a *QuotaError", err)
	}
}

func TestQuotaExceededStopsUntilTheReset(t *testing.T) {
	f := newFake(t)
	f.respond = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusForbidden)
		_, body := apiFixture(t, "quotaExceeded")
		io.WriteString(w, body)
	}
	u, _ := url.Parse(f.URL)
	tr2, err := NewTransport([]string{"K"}, nil, &Options{Table: Granular(u.Host)}) // the Pacific day
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	videos := f.URL + "/youtube/v3/videos?part=snippet&chart=mostPopular"
	want := time.Until(NextReset(time.Now()))
	err = call(t, tr2, videos)
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Bucket != Pool {
		t.Fatalf("after a 403 quotaExceeded: %v, want a *QuotaError from the upstream for the pool", err)
	}
	if qe.RetryAfter < want-2*time.Second || qe.RetryAfter > want {
		t.Errorf("RetryAfter = %v, want about %v (the next Pacific midnight)", qe.RetryAfter, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", videos, nil)
	if _, err := tr2.RoundTrip(req); !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream {
		t.Errorf("the next call: %v, want refused without sending", err)
	}
	if f.calls() != 1 {
		t.Errorf("the upstream got %d calls, want 1", f.calls())
	}
}

func TestNewTransportRejectsBadPools(t *testing.T) {
	cases := map[string]struct {
		keys  []string
		pools map[string][]string
	}{
		"keys and pools":      {[]string{"K"}, map[string][]string{"p": {"K2"}}},
		"a key in two pools":  {nil, map[string][]string{"p": {"K"}, "q": {"K"}}},
		"an empty key":        {[]string{""}, nil},
		"a pool with no name": {nil, map[string][]string{"": {"K"}}},
		"no pools at all":     {nil, map[string][]string{}},
	}
	for name, c := range cases {
		if tr, err := NewTransport(c.keys, nil, &Options{Projects: c.pools}); err == nil {
			tr.Close()
			t.Errorf("%s: no error", name)
		} else if strings.Contains(err.Error(), "K2") {
			t.Errorf("%s: the error %q shows a key", name, err)
		}
	}
}

// TestNewTransportRefusesWhatCannotWork: options the first request would
// fail on fail NewTransport instead, and a typed-nil client is an error,
// never a panic inside go-redis.
func TestNewTransportRefusesWhatCannotWork(t *testing.T) {
	var nilClient *redis.Client
	var nilCluster *redis.ClusterClient
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		opts Options
	}{
		{"a typed-nil *redis.Client", nilClient, Options{}},
		{"a typed-nil *redis.ClusterClient", nilCluster, Options{}},
		{"a negative quota", nil, Options{Quota: -1}},
		{"a negative search quota", nil, Options{SearchQuota: -1}},
		{"a negative upload quota", nil, Options{UploadQuota: -5}},
		{"a negative window", nil, Options{Window: -time.Second}},
		{"a negative reserve", nil, Options{ReserveUnits: -1}},
		{"a reserve of 100%", nil, Options{ReservePercent: 100}},
		{"a reserve larger than the quota", nil, Options{Quota: 50, ReserveUnits: 60}},
		{"a smoothing limit of no units", nil, Options{Smoothing: []quota.Limit{quota.PerWindow(0, time.Hour)}}},
		{"a bad table", nil, Options{Table: costs.Spec{Buckets: []string{Pool}, Rules: []costs.Rule{{Pattern: "GET /x", Endpoint: "x"}}}}},
		{"a table bucket with no limits", nil, Options{Table: costs.Spec{Buckets: []string{"mine"}, Rules: []costs.Rule{{Pattern: "GET /x", Endpoint: "x", Charges: []costs.Charge{{Bucket: "mine", Units: 1}}}}}}},
		{"FailLocal with no Local", nil, Options{Tollgate: tollgate.Config{Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailLocal}, nil)}}},
		{"Base set twice", nil, Options{Tollgate: tollgate.Config{Base: http.DefaultTransport}}},
		{"a cost table beside Table", nil, Options{Tollgate: tollgate.Config{Costs: &costs.Table{}}}},
		{"buckets beside Buckets", nil, Options{Tollgate: tollgate.Config{Buckets: map[string]tollgate.Bucket{}}}},
		{"a scope of its own", nil, Options{Tollgate: tollgate.Config{Scope: tollgate.Scope("x")}}},
		{"an upstream reader of its own", nil, Options{Tollgate: tollgate.Config{ReadResponse: tollgate.DefaultUpstream}}},
		{"a TokenProject that is no pool", nil, Options{TokenProject: "elsewhere"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := NewTransport([]string{"K"}, c.rdb, &c.opts)
			if err == nil {
				tr.Close()
				t.Fatal("NewTransport: no error")
			}
			if tr != nil {
				t.Errorf("NewTransport returned a Transport with its error %v", err)
			}
		})
	}
}

// TestKeysNeverPrinted: however a Transport is printed, its keys do not
// show.
func TestKeysNeverPrinted(t *testing.T) {
	const key = "AIzaSy-secret-key-123"
	tr, err := NewTransport([]string{key}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%T %v"} {
		var out string
		if verb == "%T %v" {
			out = fmt.Sprintf(verb, tr, *tr)
		} else {
			out = fmt.Sprintf(verb, *tr) + fmt.Sprintf(verb, tr)
		}
		if strings.Contains(out, key) || strings.Contains(out, fmt.Sprintf("%x", key)) {
			t.Errorf("%s prints the key: %s", verb, out)
		}
	}
	if got := fmt.Sprint(tr.key); got != "[redacted]" {
		t.Errorf("the key prints as %q", got)
	}
}
