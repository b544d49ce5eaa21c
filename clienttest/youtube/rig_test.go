package youtube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"
	yt "google.golang.org/api/youtube/v3"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
)

// The two quota models, as the simulator and the cost tables name them.
var models = []struct {
	name     string
	granular bool
}{{"classic", false}, {"granular", true}}

// rig is Google's Go client sending through a tollgate Transport to the
// simulated API, with a real redis-server behind the Transport.
type rig struct {
	t        *testing.T
	granular bool
	sim      *ytsim.Server
	root     string // the simulator's URL, e.g. http://127.0.0.1:1234
	tr       *youtube.Transport
	svc      *yt.Service
	scope    string // the pool the calls spend
	project  string // the simulator's name of the project charged

	mu        sync.Mutex
	decisions []tollgate.Decision
}

// rigOptions are what a test changes in a rig.
type rigOptions struct {
	// wrap, when set, puts a transport above tollgate's, e.g. Google's
	// OAuth transport.
	wrap func(http.RoundTripper) http.RoundTripper
	// token, when set, is the OAuth token wrap sends: the Transport then
	// has no API key, and the simulator names the project by the token.
	token string
}

// newRig starts the simulated API in the model, a redis-server, and a
// Transport with the model's cost table for the simulator's host. The
// quotas are YouTube's defaults, less tollgate's 5% reserve; windows are a
// sliding day (not the Pacific day, which a test run might straddle), and
// refusals fail fast.
func newRig(t *testing.T, granular bool, ro rigOptions) *rig {
	t.Helper()
	sim := ytsim.New(ytsim.Config{Granular: granular})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	u, _ := url.Parse(api.URL)
	r := &rig{t: t, granular: granular, sim: sim, root: api.URL, scope: youtube.DefaultProject}

	var keys []string
	r.project = ro.token
	if ro.token == "" {
		keys = []string{"test-key"}
		r.project = keys[0]
	}
	opts := youtube.Options{Table: youtube.Classic(u.Host), Window: 24 * time.Hour}
	if granular {
		opts.Table = youtube.Granular(u.Host)
	}
	opts.Tollgate.Policy = tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil)
	opts.Tollgate.Trace.Decided = func(_ context.Context, d tollgate.Decision) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.decisions = append(r.decisions, d)
	}
	tr, err := youtube.NewTransport(keys, redistest.Start(t).Client(t), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	r.tr = tr
	var rt http.RoundTripper = tr
	if ro.wrap != nil {
		rt = ro.wrap(tr)
	}
	client := &http.Client{Transport: rt}
	r.svc, err = yt.NewService(context.Background(), option.WithHTTPClient(client), option.WithEndpoint(api.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// buckets are the buckets of the rig's model.
func (r *rig) buckets() []string {
	if r.granular {
		return []string{youtube.Pool, youtube.Search, youtube.Upload, youtube.BatchGetStats}
	}
	return []string{youtube.Pool, youtube.BatchGetStats}
}

// charged returns what tollgate counts as spent in each bucket of the
// rig's scope, and what the simulator charged the project, by bucket.
func (r *rig) charged() (counted, sim map[string]int64) {
	r.t.Helper()
	counted, sim = map[string]int64{}, map[string]int64{}
	for _, b := range r.buckets() {
		usage, err := r.tr.Usage(context.Background(), r.scope, b)
		if err != nil {
			r.t.Fatalf("usage of %s: %v", b, err)
		}
		counted[b] = usage[0].Used
		sim[b] = r.sim.BucketStats(b)[r.project].Units
	}
	return counted, sim
}

// check fails the test unless tollgate counts, in every bucket, exactly
// what the simulator charged, and that is want (a bucket it leaves out:
// 0).
func (r *rig) check(want map[string]int64) {
	r.t.Helper()
	got, sim := r.charged()
	for _, b := range r.buckets() {
		if got[b] != sim[b] || got[b] != want[b] {
			r.t.Errorf("bucket %s: tollgate counts %d units, the simulator charged %d; want %d", b, got[b], sim[b], want[b])
		}
	}
	r.t.Logf("charged: %v", sim)
}

// requests counts the simulator's arrivals of method: the calls, and the
// requests sent to upload sessions the method opened.
func (r *rig) requests(method string) (calls, chunks int) {
	for _, a := range r.sim.Arrivals() {
		switch {
		case a.Method != method:
		case a.Chunk:
			chunks++
		default:
			calls++
		}
	}
	return calls, chunks
}

// chargedDecisions counts the Transport's decisions that reserved units,
// and those that were free (asking nothing of Redis).
func (r *rig) chargedDecisions() (charged, free int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.decisions {
		if d.Free {
			free++
		} else {
			charged++
		}
	}
	return charged, free
}
