// Package ytsim simulates the YouTube Data API v3 in process, for the
// offline demo and for tests. It is the upstream truth: it meters every Cloud
// project's quota on its own, the way Google does, so a test can check that
// the throttler in front of it never spent more than the upstream allowed,
// and the throttler can be shown a real 403 quotaExceeded when it did.
//
// Three read methods are simulated: videos.list (the mostPopular chart and
// lookups by id), channels.list (by id) and search.list. Their content is
// synthetic but deterministic: the same request always returns the same
// bytes, on any Server, so tests can compare answers.
//
// Mount a Server at the root of an httptest.Server; clients use the base URL
// "<server URL>/youtube/v3".
package ytsim

import (
	"context"
	"net/http"
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
	Pool   = "pool"   // every method but, in the granular model, search.list
	Search = "search" // search.list, in the granular model
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
	// refused with 400 keyInvalid. New copies the map.
	Projects map[string]string
	// Now is the clock; nil means time.Now. Tests inject one to cross
	// window boundaries without waiting.
	Now func() time.Time
	// Granular makes the Server meter the 2026 granular model: search.list
	// spends one call of a bucket of its own (SearchQuota calls a window)
	// instead of 100 units of the pool.
	Granular bool
	// SearchQuota is the search bucket's calls per window in the granular
	// model; 0 (or less) means DefaultSearchQuota.
	SearchQuota int64
	// Latency, when positive, delays every answer by this long, or until
	// the request's context is done. The request is metered when it
	// arrives, before the delay, as Google charges a call it received even
	// if the caller stopped waiting.
	Latency time.Duration
}

// Server is the simulated API: an http.Handler. It is safe for concurrent
// use.
type Server struct {
	quota    map[string]int64 // by bucket
	granular bool
	window   time.Duration
	projects map[string]string // nil: every key is its own project
	now      func() time.Time
	latency  time.Duration
	mux      *http.ServeMux

	mu       sync.Mutex
	meters   map[meterKey]*meter
	arrivals []Arrival
}

// meterKey names one bucket of one project.
type meterKey struct{ project, bucket string }

// meter is one project's account.
type meter struct {
	stats       ProjectStats // WindowUnits is kept only for windowStart
	windowStart time.Time    // the window WindowUnits belongs to
}

// ProjectStats is what one project sent and was charged.
type ProjectStats struct {
	// Requests counts every request attributed to the project, refused ones
	// included, e.g. 52.
	Requests int64
	// Units is the total charged over all windows, e.g. 250.
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
	// the request named no valid key (403 forbidden, 400 keyInvalid) and
	// for paths outside /youtube/v3/ sent without one.
	Project string
	// Method is the API method, e.g. "videos.list"; "unknown" for an
	// unknown path under /youtube/v3/, "<resource>.<HTTP method>" (e.g.
	// "videos.POST") for a method the Server does not simulate, and empty
	// for paths outside /youtube/v3/.
	Method string
	// Bucket is the bucket metered: Pool, or Search for search.list in the
	// granular model.
	Bucket string
	// Units is what was charged, e.g. 100; 0 when the request was refused
	// before charging (bad key, quota exceeded) or is outside the API.
	Units int64
	// Status is the HTTP status answered, e.g. 200 or 403.
	Status int
}

// New returns a Server configured by cfg.
func New(cfg Config) *Server {
	s := &Server{
		quota:    map[string]int64{Pool: cfg.Quota, Search: cfg.SearchQuota},
		granular: cfg.Granular,
		window:   cfg.Window,
		now:      cfg.Now,
		latency:  cfg.Latency,
		mux:      http.NewServeMux(),
		meters:   make(map[meterKey]*meter),
	}
	if s.quota[Pool] <= 0 {
		s.quota[Pool] = DefaultQuota
	}
	if s.quota[Search] <= 0 {
		s.quota[Search] = DefaultSearchQuota
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

// routes registers the methods. A "GET /path" pattern is more specific than
// the bare "/path" registered next to it, so the bare one only catches the
// other HTTP methods, which Google also charges for.
func (s *Server) routes() {
	for _, m := range []struct {
		resource, method string
		cost             int64
		answer           func(*http.Request) reply
	}{
		{"videos", "videos.list", 1, videosList},
		{"channels", "channels.list", 1, channelsList},
		{"search", "search.list", 100, searchList},
	} {
		bucket, cost := Pool, m.cost
		if s.granular && m.method == "search.list" {
			bucket, cost = Search, 1
		}
		s.mux.HandleFunc("GET /youtube/v3/"+m.resource, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, m.method, bucket, cost, m.answer)
		})
		s.mux.HandleFunc("/youtube/v3/"+m.resource, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, m.resource+"."+r.Method, Pool, 1, methodNotAllowed)
		})
	}
	s.mux.HandleFunc("/youtube/v3/", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, "unknown", Pool, 1, notFound)
	})
	// Outside the API: nothing to meter.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, "", Pool, 0, notFound)
	})
}

// ServeHTTP answers one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// serve runs one request: identify the project, answer, meter (which may
// turn the answer into quotaExceeded), wait out the latency, write. A cost
// of 0 marks a path outside the API, which needs no key and is not charged.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, method, bucket string, cost int64, answer func(*http.Request) reply) {
	project, refusal := s.project(r)
	var rep reply
	switch {
	case cost == 0:
		rep = answer(r)
	case refusal != nil:
		// Google does not charge a call it cannot attribute to a project.
		rep, cost = *refusal, 0
	default:
		rep = answer(r)
	}
	rep = s.meter(project, method, bucket, cost, rep)
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

// meter charges cost to the current window of a project's bucket and
// records the arrival.
// When the cost does not fit, nothing is charged and the answer becomes
// 403 quotaExceeded. Checking and charging under one lock is what keeps
// concurrent requests from spending past the quota.
func (s *Server) meter(project, method, bucket string, cost int64, rep reply) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	key := meterKey{project, bucket}
	m := s.meters[key]
	if m == nil {
		m = &meter{}
		s.meters[key] = m
	}
	if start := windowStart(now, s.window); !start.Equal(m.windowStart) {
		m.windowStart, m.stats.WindowUnits = start, 0
	}
	m.stats.Requests++
	var units int64
	if cost > 0 {
		if m.stats.WindowUnits+cost > s.quota[bucket] {
			rep = quotaExceeded()
			m.stats.QuotaErrors++
		} else {
			units = cost
			m.stats.Units += cost
			m.stats.WindowUnits += cost
		}
	}
	s.arrivals = append(s.arrivals, Arrival{At: now, Project: project, Method: method, Bucket: bucket, Units: units, Status: rep.status})
	return rep
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
// that the Requests of all projects add up to len(Arrivals()) (in the
// classic model, where every request meters the pool).
func (s *Server) Stats() map[string]ProjectStats { return s.BucketStats(Pool) }

// BucketStats returns every project's account of one bucket (Pool or
// Search), by project name.
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
