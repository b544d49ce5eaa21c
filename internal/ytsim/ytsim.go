// Package ytsim simulates the YouTube Data API v3 in process, for the
// offline demo and for tests. It is the upstream truth: it meters every Cloud
// project's quota on its own, the way Google does, so a test can check that
// the throttler in front of it never spent more than the upstream allowed,
// and the throttler can be shown a real 403 quotaExceeded when it did.
//
// Every method of the API is served and charged its price (see
// prices.go), recognised by HTTP method and path exactly as Google's Go
// client (google.golang.org/api/youtube/v3) sends them. Three read methods
// answer content: videos.list (the mostPopular chart and lookups by id),
// channels.list (by id) and search.list. Their content is synthetic but
// deterministic: the same request always returns the same bytes, on any
// Server, so tests can compare answers. The other methods answer a minimal
// valid body: an empty list, the resource sent back with an id, or 204.
//
// Uploads work as on Google's upload server: one request with
// uploadType=multipart or media, or a resumable session opened with
// uploadType=resumable and fed in chunks (see upload.go). Only the request
// that opens a session is charged.
//
// Mount a Server at the root of an httptest.Server; clients use the base URL
// "<server URL>/youtube/v3", or "<server URL>/" as the Go client's endpoint.
package ytsim

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the Pacific day must be right on machines without a zoneinfo database
)

// DefaultQuota is YouTube's default quota per Cloud project and day, in
// units; a Config with Quota 0 uses it.
const DefaultQuota = 10000

// DefaultSearchQuota is search.list's own daily bucket in the granular
// model, in calls.
const DefaultSearchQuota = 100

// Buckets a project's calls are metered in.
const (
	Pool          = "pool"          // every method but videos.batchGetStats, and in the granular model search.list and videos.insert
	Search        = "search"        // search.list, in the granular model
	Upload        = "upload"        // videos.insert, in the granular model
	BatchGetStats = "batchGetStats" // videos.batchGetStats, in both models
)

// pacific is the time zone of YouTube's quota day: it resets at midnight
// America/Los_Angeles, so it lasts 23 or 25 hours when DST starts or ends.
var pacific = mustLoadLocation("America/Los_Angeles")

func mustLoadLocation(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		// Unreachable: time/tzdata is embedded above.
		panic("ytsim: " + err.Error())
	}
	return loc
}

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// Quota is the units each project may spend per window, e.g. 10000;
	// 0 (or less) means DefaultQuota.
	Quota int64
	// Window is the quota window. 0 (or less) means YouTube's own: the
	// Pacific day, which resets at midnight America/Los_Angeles (23 or 25
	// hours long on DST change days). A positive Window makes fixed windows
	// of that length, aligned to multiples of Window since the Unix epoch
	// (so a Window of time.Hour resets on the hour, in UTC).
	Window time.Duration
	// Projects maps API keys to Cloud project names, e.g.
	// {"key-a": "project-1", "key-b": "project-1"}: keys of one project
	// share its quota, as on Google. nil means every key is its own project
	// (named by the key itself). With a non-nil map, a key not in it is
	// refused with 400 keyInvalid. New copies the map. A request names its
	// key with the key parameter, the X-Goog-Api-Key header or, failing
	// both, an OAuth token (Authorization: Bearer), looked up the same way.
	Projects map[string]string
	// Now is the clock; nil means time.Now. Tests inject one to cross
	// window boundaries without waiting.
	Now func() time.Time
	// Granular makes the Server meter the 2026 granular model:
	// search.list and videos.insert each spend one call of a bucket of
	// their own (SearchQuota and UploadQuota calls a window) instead of
	// their classic prices in the pool. Every other method spends the pool
	// at its classic price, but videos.batchGetStats, which spends one
	// call of its own bucket (BatchStatsQuota) in both models.
	Granular bool
	// SearchQuota is the search bucket's calls per window in the granular
	// model; 0 (or less) means DefaultSearchQuota.
	SearchQuota int64
	// UploadQuota is the upload bucket's calls per window in the granular
	// model; 0 (or less) means DefaultUploadQuota.
	UploadQuota int64
	// BatchStatsQuota is the batchGetStats bucket's calls per window;
	// 0 (or less) means DefaultBatchStatsQuota.
	BatchStatsQuota int64
	// VideosInsertUnits is videos.insert's price in pool units in the
	// classic model, e.g. 1600 as billed before 2025-12-04; 0 (or less)
	// means DefaultVideosInsertUnits.
	VideosInsertUnits int64
	// UploadTTL is how long a resumable upload session lives after it is
	// opened; chunks sent later are answered 404 and the session is
	// forgotten. 0 (or less) means DefaultUploadTTL.
	UploadTTL time.Duration
	// Latency, when positive, delays every answer by this long, or until
	// the request's context is done. The request is metered when it
	// arrives, before the delay, as Google charges a call it received even
	// if the caller stopped waiting.
	Latency time.Duration
}

// Server is the simulated API: an http.Handler. It is safe for concurrent
// use.
type Server struct {
	quota     map[string]int64  // by bucket
	prices    map[string]charge // by method name
	window    time.Duration
	projects  map[string]string // nil: every key is its own project
	now       func() time.Time
	latency   time.Duration
	uploadTTL time.Duration
	mux       *http.ServeMux

	mu       sync.Mutex
	meters   map[meterKey]*meter
	arrivals []Arrival
	faults   map[string][]Fault  // by method name; "" for any method
	sessions map[string]*session // resumable uploads by upload_id
	sweepAt  int                 // len(sessions) at which to drop expired ones
	created  uint64              // resources and sessions created so far
}

// meterKey names one bucket of one project.
type meterKey struct{ project, bucket string }

// meter is one project's account.
type meter struct {
	stats       ProjectStats // WindowUnits is kept only for windowStart
	windowStart time.Time    // the window WindowUnits belongs to
}

// ProjectStats is what one project sent and was charged in one bucket.
type ProjectStats struct {
	// Requests counts every call metered in the bucket, refused ones
	// included, e.g. 52. The chunks of resumable uploads are not calls.
	Requests int64
	// Units is the total charged over all windows, e.g. 250. In the
	// Search, Upload and BatchGetStats buckets a call is one unit.
	Units int64
	// QuotaErrors counts the 403 quotaExceeded answers, e.g. 1.
	QuotaErrors int64
	// WindowUnits is what was charged in the window current at the time of
	// the Stats call, e.g. 200 (0 once that window has passed).
	WindowUnits int64
}

// Arrival is one request as the Server saw it.
type Arrival struct {
	// At is the Server's clock when the request arrived and was metered.
	At time.Time
	// Project is the Cloud project charged, e.g. "project-1"; empty when
	// the request named no valid key (403 forbidden, 400 keyInvalid), for
	// paths outside the API sent without one, and for chunks sent to an
	// upload session the Server does not know.
	Project string
	// Method is the API method, e.g. "videos.list" (the discovery
	// document's id without "youtube."); "unknown" for an unknown path
	// under /youtube/v3/ (or /upload/youtube/v3/), "<resource>.<HTTP
	// method>" (e.g. "videos.PATCH") for an HTTP method a path lacks, and
	// empty for paths outside the API.
	Method string
	// Bucket is the bucket metered: Pool, BatchGetStats, or in the
	// granular model Search or Upload.
	Bucket string
	// Units is what was charged, e.g. 100; 0 when the request was refused
	// before charging (bad key, quota exceeded, an injected fault), is
	// outside the API, or is a chunk.
	Units int64
	// Status is the HTTP status answered, e.g. 200 or 403; 0 while the
	// answer is being built.
	Status int
	// Chunk is true for a request sent to a resumable upload session (a
	// chunk or a status query): part of the call that opened the session,
	// never charged, and not counted in ProjectStats.
	Chunk bool
}

// New returns a Server configured by cfg.
func New(cfg Config) *Server {
	s := &Server{
		quota: map[string]int64{
			Pool:          orDefault(cfg.Quota, DefaultQuota),
			Search:        orDefault(cfg.SearchQuota, DefaultSearchQuota),
			Upload:        orDefault(cfg.UploadQuota, DefaultUploadQuota),
			BatchGetStats: orDefault(cfg.BatchStatsQuota, DefaultBatchStatsQuota),
		},
		prices:    priceList(cfg),
		window:    cfg.Window,
		now:       cfg.Now,
		latency:   cfg.Latency,
		uploadTTL: time.Duration(orDefault(int64(cfg.UploadTTL), int64(DefaultUploadTTL))),
		mux:       http.NewServeMux(),
		meters:    make(map[meterKey]*meter),
		faults:    make(map[string][]Fault),
		sessions:  make(map[string]*session),
		sweepAt:   sweepFloor,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.Projects != nil {
		s.projects = make(map[string]string, len(cfg.Projects))
		for k, p := range cfg.Projects {
			s.projects[k] = p
		}
	}
	s.routes()
	return s
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// routes registers the methods. A "GET /path" pattern is more specific than
// the bare "/path" registered next to it, so the bare one only catches the
// HTTP methods the path lacks, which Google also charges for.
func (s *Server) routes() {
	byPath := map[string][]*method{}
	uploads := map[string][]*method{}
	var paths []string
	for i := range methods {
		m := &methods[i]
		s.mux.HandleFunc(m.verb+" "+m.path, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, m.name, s.prices[m.name], func(c *call) reply {
				return m.answer(r, readResource(r), c.id)
			})
		})
		if byPath[m.path] == nil {
			paths = append(paths, m.path)
		}
		byPath[m.path] = append(byPath[m.path], m)
		if m.media {
			uploads[m.path] = append(uploads[m.path], m)
		}
	}
	for _, path := range paths {
		ms := byPath[path]
		resource, _, _ := strings.Cut(ms[0].name, ".")
		allow := allowed(ms)
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, resource+"."+r.Method, charge{Pool, 1}, func(*call) reply {
				return methodNotAllowed(allow)
			})
		})
		if ms := uploads[path]; ms != nil {
			h := func(w http.ResponseWriter, r *http.Request) { s.upload(w, r, ms) }
			s.mux.HandleFunc("/upload"+path, h)
			s.mux.HandleFunc("/resumable/upload"+path, h)
		}
	}
	for _, prefix := range []string{"/youtube/v3/", "/upload/youtube/v3/", "/resumable/upload/youtube/v3/"} {
		s.mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, "unknown", charge{Pool, 1}, func(c *call) reply { return notFound(c.r) })
		})
	}
	// Outside the API: nothing to meter.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, "", charge{Pool, 0}, func(c *call) reply { return notFound(c.r) })
	})
}

// allowed lists the HTTP methods of ms for an Allow header, e.g.
// "DELETE, GET, HEAD, POST, PUT".
func allowed(ms []*method) string {
	var verbs []string
	for _, m := range ms {
		verbs = append(verbs, m.verb)
		if m.verb == http.MethodGet {
			verbs = append(verbs, http.MethodHead)
		}
	}
	sort.Strings(verbs)
	return strings.Join(verbs, ", ")
}

// ServeHTTP answers one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// call is one admitted request, for the function that answers it.
type call struct {
	r       *http.Request
	project string
	at      time.Time // when it was metered
	id      uint64    // numbers what the call creates, unique in the Server
}

// serve runs one call: identify the project, meter it (which may refuse
// it), answer it if admitted, wait out the latency, write. A charge of 0
// units marks a path outside the API, which needs no key and is not
// charged.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, method string, ch charge, answer func(*call) reply) {
	project, refusal := s.project(r)
	if refusal != nil && ch.units > 0 {
		// Google does not charge a call it cannot attribute to a project.
		s.record(project, method, ch.bucket, refusal.status)
		s.wait(r.Context())
		refusal.write(w)
		return
	}
	c := &call{r: r, project: project}
	i, rep := s.admit(c, method, ch)
	if rep == nil {
		a := answer(c)
		rep = &a
		s.finish(i, rep.status)
	}
	s.wait(r.Context())
	rep.write(w)
}

// project finds the request's project from its API key, or the refusal to
// send when there is none. The key itself never goes into a refusal.
func (s *Server) project(r *http.Request) (string, *reply) {
	key := r.URL.Query().Get("key")
	if key == "" {
		key = r.Header.Get("X-Goog-Api-Key")
	}
	if key == "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(tok)
		}
	}
	if key == "" {
		rep := apiError(http.StatusForbidden, "global", "forbidden",
			"The request is missing a valid API key.", "")
		return "", &rep
	}
	if s.projects == nil {
		return key, nil
	}
	if p, ok := s.projects[key]; ok {
		return p, nil
	}
	rep := apiError(http.StatusBadRequest, "usageLimits", "keyInvalid",
		"API key not valid. Please pass a valid API key.", "")
	return "", &rep
}

// meterOf returns the account of a project's bucket, moved to the window
// holding now; s.mu is held.
func (s *Server) meterOf(project, bucket string, now time.Time) *meter {
	key := meterKey{project, bucket}
	m := s.meters[key]
	if m == nil {
		m = &meter{}
		s.meters[key] = m
	}
	if start := windowStart(now, s.window); !start.Equal(m.windowStart) {
		m.windowStart, m.stats.WindowUnits = start, 0
	}
	return m
}

// admit meters one call of method: it charges ch to the current window of
// the project's bucket and records the arrival, whose index it returns.
// When a fault is injected for the call, or the charge does not fit,
// nothing is charged and the refusal is returned. Checking and charging
// under one lock is what keeps concurrent calls from spending past the
// quota.
func (s *Server) admit(c *call, method string, ch charge) (int, *reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c.at = now
	s.created++
	c.id = s.created
	m := s.meterOf(c.project, ch.bucket, now)
	m.stats.Requests++
	a := Arrival{At: now, Project: c.project, Method: method, Bucket: ch.bucket}
	var refusal *reply
	if f, ok := s.nextFault(method); ok {
		rep := faultReplies[f]
		refusal = &rep
		if f == QuotaExceeded {
			m.stats.QuotaErrors++
		}
	} else if ch.units > 0 && m.stats.WindowUnits+ch.units > s.quota[ch.bucket] {
		rep := quotaExceeded()
		refusal = &rep
		m.stats.QuotaErrors++
	} else {
		a.Units = ch.units
		m.stats.Units += ch.units
		m.stats.WindowUnits += ch.units
	}
	if refusal != nil {
		a.Status = refusal.status
	}
	s.arrivals = append(s.arrivals, a)
	return len(s.arrivals) - 1, refusal
}

// record notes a request refused before metering (no valid key): it counts
// in the empty project's requests, and nothing is charged.
func (s *Server) record(project, method, bucket string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.meterOf(project, bucket, now).stats.Requests++
	s.arrivals = append(s.arrivals, Arrival{At: now, Project: project, Method: method, Bucket: bucket, Status: status})
}

// finish sets the status of arrival i once its answer is built.
func (s *Server) finish(i, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals[i].Status = status
}

// wait delays the answer by the configured latency, or until ctx is done.
func (s *Server) wait(ctx context.Context) {
	if s.latency <= 0 {
		return
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Stats returns every project's account of its pool, by project name.
// Requests that named no valid key are counted under the empty name, so
// that the Requests of all projects add up to the arrivals that are not
// chunks (in the classic model, where every call but videos.batchGetStats
// meters the pool).
func (s *Server) Stats() map[string]ProjectStats { return s.BucketStats(Pool) }

// BucketStats returns every project's account of one bucket (Pool,
// Search, Upload or BatchGetStats), by project name: what each project
// spent there, e.g. BucketStats(Upload)["project-1"].WindowUnits for the
// videos.insert calls of the current window in the granular model.
func (s *Server) BucketStats(bucket string) map[string]ProjectStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := windowStart(s.now(), s.window)
	out := make(map[string]ProjectStats, len(s.meters))
	for k, m := range s.meters {
		if k.bucket != bucket {
			continue
		}
		st := m.stats
		if !m.windowStart.Equal(start) {
			st.WindowUnits = 0
		}
		out[k.project] = st
	}
	return out
}

// Arrivals returns every request so far, in the order they were metered.
// The Server keeps them all, so it suits runs of thousands of requests,
// not endless ones.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Arrival, len(s.arrivals))
	copy(out, s.arrivals)
	return out
}

// windowStart returns the start of the quota window holding t: midnight
// America/Los_Angeles on t's Pacific date when window <= 0, else the last
// multiple of window since the Unix epoch. (time.Truncate would count from
// year 1, not 1970, which differs for windows that do not divide a day.)
func windowStart(t time.Time, window time.Duration) time.Time {
	if window <= 0 {
		lt := t.In(pacific)
		// Midnight exists on every Pacific date: DST changes at 02:00.
		return time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, pacific)
	}
	ns, w := t.UnixNano(), int64(window)
	k := ns / w
	if ns%w < 0 {
		k-- // floor, for instants before 1970
	}
	return time.Unix(0, k*w)
}
