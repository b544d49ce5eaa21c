// Package ghsim simulates GitHub's REST and GraphQL APIs in process, for
// tests. It is the upstream truth: it meters every credential's limits on
// its own, as GitHub documents them, and refuses as GitHub refuses, so that
// a test can check that the throttler in front of it never made GitHub say
// no, and can show the throttler GitHub's refusals when it did.
//
// What it enforces, per credential (the token of the Authorization
// header; requests without one share a single anonymous credential):
//
//   - Primary limits per resource
//     (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
//     core 5,000 requests an hour (anonymous: 60), search 30 a minute
//     (anonymous: 10), code_search 10 a minute
//     (https://docs.github.com/en/rest/search/search#rate-limit), graphql
//     5,000 points an hour
//     (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
//     Each is a fixed window that starts with the first request after the
//     last reset and ends at a whole second (resets are announced in epoch
//     seconds), at most a window's length later. Every answer carries
//     X-RateLimit-Limit, -Remaining, -Used, -Reset and -Resource; a
//     request beyond the limit is answered 403 (or Config.Status) with
//     X-RateLimit-Remaining: 0, a GraphQL one 200 with an error of type
//     RATE_LIMITED.
//   - Secondary limits (the same pages): at most 100 requests in flight
//     (REST and GraphQL together); 900 points a minute for REST (GET, HEAD
//     and OPTIONS 1 point, other methods 5) and 2,000 for GraphQL (a query
//     1, a mutation 5); 80 content-creating requests a minute and 500 an
//     hour (every REST POST but /markdown, every GraphQL mutation). These
//     windows slide. A request beyond one is answered 403 (or
//     Config.Status) with a message saying so, and Retry-After when
//     Config.RetryAfter is set.
//   - GraphQL points by the documented formula (the requests each
//     connection needs, summed, divided by 100 and rounded to the nearest
//     whole number, at least 1), answered in data.rateLimit when the query
//     asks; page sizes outside 1-100 and queries of more than 500,000 nodes
//     are refused, as the same page says.
//   - Conditional requests
//     (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate):
//     every 200 answered to a GET carries an ETag, and a GET whose
//     If-None-Match names it is answered 304 Not Modified, which costs no
//     primary unit when the request carries a credential (anonymous ones
//     pay theirs) and still costs its secondary point.
//
// A refused request spends nothing. Minute and Hour scale time, so that a
// test crosses windows in seconds.
//
// It answers enough of the API for clients to run: the authenticated
// user, users, repositories, their issues (paginated with Link headers)
// and issue creation, the searches, /rate_limit, and GraphQL (data for
// viewer { login } and rateLimit; null for other fields). Other paths are
// 404, still charged; repositories of the owner "forbidden" answer 403 for
// want of permission, which is not a rate limit.
package ghsim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resources, as X-RateLimit-Resource names them.
const (
	Core       = "core"
	Search     = "search"
	CodeSearch = "code_search"
	GraphQL    = "graphql"
)

// Config configures a Server. Zero values mean GitHub's documented
// defaults.
type Config struct {
	// Minute and Hour are the lengths of the API's minute and hour: 0
	// means the real ones. Every window is counted in them.
	Minute, Hour time.Duration
	// Primary limits, per credential: Core and GraphQL an Hour, Search and
	// CodeSearch a Minute; AnonymousCore and AnonymousSearch for requests
	// without credentials.
	Core, Search, CodeSearch, GraphQL int64
	AnonymousCore, AnonymousSearch    int64
	// Secondary limits, per credential: points a Minute, content-creating
	// requests a Minute and an Hour, requests in flight.
	RESTPoints, GraphQLPoints        int64
	ContentPerMinute, ContentPerHour int64
	InFlight                         int
	// Status answers refusals: 403 (the default) or 429, both of which
	// GitHub documents.
	Status int
	// RetryAfter makes secondary refusals carry Retry-After: the whole
	// seconds until the limit has room.
	RetryAfter bool
	// Latency, when set, says how long each request takes to answer,
	// after it is metered.
	Latency func(*http.Request) time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// The documented defaults.
const (
	defaultCore            = 5000
	defaultAnonymousCore   = 60
	defaultSearch          = 30
	defaultAnonymousSearch = 10
	defaultCodeSearch      = 10
	defaultGraphQL         = 5000
	defaultRESTPoints      = 900
	defaultGraphQLPoints   = 2000
	defaultContentMinute   = 80
	defaultContentHour     = 500
	defaultInFlight        = 100
)

// Server is the simulated API: an http.Handler, safe for concurrent use.
// Mount it at the root of an httptest.Server; clients use its URL as the
// API's base URL.
type Server struct {
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	flying  int              // requests in flight, every credential's
	users   map[string]*user // by identity: a token, or "" for the anonymous
	served  []Arrival
	stats   Stats
	issues  map[string]int // issues created, by "owner/repo"
	nextID  int
	windows []Window // closed primary windows
}

// user is what the Server meters for one credential.
type user struct {
	id       int
	login    string
	anon     bool
	primary  map[string]*fixedWindow // by resource
	rest     slidingLog
	graphQL  slidingLog
	content  slidingLog // a Minute
	contentH slidingLog // an Hour
	inFlight int
}

// Arrival is one request the Server served (not refused).
type Arrival struct {
	At       time.Time
	Identity string // "user-1", ..., or "anonymous"
	Resource string // "" for a request no primary limit counts (GET /rate_limit)
	Units    int64  // primary units: 1, or a GraphQL query's points
	Points   int64  // secondary points (REST or GraphQL)
	GraphQL  bool
	Content  bool
	// NotModified reports a conditional request answered 304 Not
	// Modified: Units is 0 when it was authorized.
	NotModified bool
}

// Window is one primary window of one credential.
type Window struct {
	Identity, Resource string
	Start, Reset       time.Time
	Used, Limit        int64
}

// Stats sums up what the Server saw.
type Stats struct {
	Served int // requests answered as the API would
	// Primary and Secondary count the refusals of each kind.
	Primary, Secondary int
	// MostInFlight is the most requests one credential had in flight at
	// once, refused ones included.
	MostInFlight int
	// InFlightTime is the time requests spent in flight, summed: 2
	// requests in flight for 3 seconds are 6 seconds. Divided by the time
	// from First to Last, it is the mean number in flight.
	InFlightTime time.Duration
	// First is when the first request arrived, Last when the last request
	// arrived or left.
	First, Last time.Time
}

// New returns a Server.
func New(cfg Config) *Server {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Core, defaultCore)
	def(&cfg.AnonymousCore, defaultAnonymousCore)
	def(&cfg.Search, defaultSearch)
	def(&cfg.AnonymousSearch, defaultAnonymousSearch)
	def(&cfg.CodeSearch, defaultCodeSearch)
	def(&cfg.GraphQL, defaultGraphQL)
	def(&cfg.RESTPoints, defaultRESTPoints)
	def(&cfg.GraphQLPoints, defaultGraphQLPoints)
	def(&cfg.ContentPerMinute, defaultContentMinute)
	def(&cfg.ContentPerHour, defaultContentHour)
	if cfg.InFlight <= 0 {
		cfg.InFlight = defaultInFlight
	}
	if cfg.Minute <= 0 {
		cfg.Minute = time.Minute
	}
	if cfg.Hour <= 0 {
		cfg.Hour = time.Hour
	}
	if cfg.Status == 0 {
		cfg.Status = http.StatusForbidden
	}
	s := &Server{cfg: cfg, now: cfg.Now, users: map[string]*user{}, issues: map[string]int{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Stats returns what the Server saw so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Served returns every request served so far, in arrival order.
func (s *Server) Served() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.served...)
}

// Windows returns the primary windows of resource so far, every
// credential's, the current ones last.
func (s *Server) Windows(resource string) []Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Window
	for _, w := range s.windows {
		if w.Resource == resource {
			out = append(out, w)
		}
	}
	for _, u := range s.users {
		if w := u.primary[resource]; w != nil {
			out = append(out, w.report(u.login, resource))
		}
	}
	return out
}

// identity returns the credential of a request: its token, or "" for
// none. A scheme without a credential ("Bearer ", which go-github sends
// without a token) is none.
func identity(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, rest := h, ""
	if i := strings.IndexAny(h, " \t"); i >= 0 {
		scheme, rest = h[:i], strings.TrimSpace(h[i+1:])
	}
	for _, s := range []string{"bearer", "token", "basic"} {
		if strings.EqualFold(scheme, s) && (s != "basic" || rest == "") {
			return rest
		}
	}
	return h
}

// userOf returns the user of a credential, made on first sight. The
// caller holds s.mu.
func (s *Server) userOf(token string) *user {
	u := s.users[token]
	if u == nil {
		s.nextID++
		u = &user{id: s.nextID, login: "user-" + strconv.Itoa(s.nextID), anon: token == "", primary: map[string]*fixedWindow{}}
		if u.anon {
			u.login = "anonymous"
		}
		s.users[token] = u
	}
	return u
}

// request is what metering needs to know of a request.
type request struct {
	resource    string // "" when no primary limit counts it
	units       int64  // primary units
	points      int64  // secondary points
	graphQL     bool
	content     bool
	notModified bool // answered 304 Not Modified
}

// ServeHTTP meters the request, refuses it if a limit says so, and
// otherwise answers it after Config.Latency.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := identity(r)
	if r.Method == http.MethodPost && r.URL.Path == "/graphql" {
		s.serveGraphQL(w, r, token)
		return
	}
	req := restRequest(r)
	var answer *httptest.ResponseRecorder
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		// Rendered first, for its ETag: a conditional request answered
		// Not Modified costs no primary unit when it is authorized.
		answer = s.render(r, token)
		if notModified(r, answer) {
			req.notModified = true
			if token != "" {
				req.units = 0
			}
		}
	}
	u, head, ok := s.enter(w, r, token, req)
	defer s.leave(u)
	switch {
	case !ok:
	case answer == nil:
		s.serveREST(w, r, u, head)
	case req.notModified:
		for k, v := range head {
			w.Header()[k] = v
		}
		w.Header().Set("ETag", answer.Header().Get("ETag"))
		w.WriteHeader(http.StatusNotModified)
	default:
		for k, v := range answer.Header() {
			w.Header()[k] = v
		}
		for k, v := range head { // the rate-limit headers as of the admission
			w.Header()[k] = v
		}
		w.WriteHeader(answer.Code)
		w.Write(answer.Body.Bytes())
	}
}

// render answers a GET (or HEAD) request into a recorder, with an ETag
// when the answer is a 200: what the request would be answered, as of
// now, before it is metered.
func (s *Server) render(r *http.Request, token string) *httptest.ResponseRecorder {
	s.mu.Lock()
	u := s.userOf(token)
	s.mu.Unlock()
	rec := httptest.NewRecorder()
	s.serveREST(rec, r, u, nil)
	if rec.Code == http.StatusOK {
		sum := sha256.Sum256(rec.Body.Bytes())
		rec.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	}
	return rec
}

// notModified reports whether a conditional request (If-None-Match) names
// the ETag of its answer.
// https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate
func notModified(r *http.Request, answer *httptest.ResponseRecorder) bool {
	etag := answer.Header().Get("ETag")
	if etag == "" {
		return false
	}
	for _, tag := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

// enter counts a request into flight and meters it. It answers a request
// a limit refuses, reporting false; otherwise it waits for the request's
// latency and returns the headers to answer with. The caller calls leave
// when the request is answered.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, token string, req request) (*user, http.Header, bool) {
	s.mu.Lock()
	u := s.userOf(token)
	s.fly(u, 1)
	refusal, head := s.admit(u, req)
	s.mu.Unlock()
	if refusal != nil {
		refusal.write(w, head, s.cfg.Status)
		return u, head, false
	}
	s.wait(r)
	return u, head, true
}

// fly counts a request into flight (n = 1) or out of it (-1), and the
// time spent in flight until now. The caller holds s.mu.
func (s *Server) fly(u *user, n int) {
	now := s.now()
	if s.stats.First.IsZero() {
		s.stats.First = now
	} else {
		s.stats.InFlightTime += time.Duration(s.flying) * now.Sub(s.stats.Last)
	}
	s.stats.Last = now
	s.flying += n
	u.inFlight += n
}

// leave counts a request out of flight.
func (s *Server) leave(u *user) {
	s.mu.Lock()
	s.fly(u, -1)
	s.mu.Unlock()
}

// wait sleeps for the request's latency, or until it is abandoned.
func (s *Server) wait(r *http.Request) {
	if s.cfg.Latency == nil {
		return
	}
	if d := s.cfg.Latency(r); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	}
}

// admit checks every limit the request counts against, in the order
// GitHub's page lists them, and records it when none refuses it. It
// returns the refusal, if any, and the rate-limit headers to answer with.
// The caller holds s.mu, and has counted the request in flight.
func (s *Server) admit(u *user, req request) (*refusal, http.Header) {
	now := s.now()
	s.stats.MostInFlight = max(s.stats.MostInFlight, u.inFlight)
	head := http.Header{}
	var win *fixedWindow
	if req.resource != "" {
		win = s.window(u, req.resource, now)
	} else {
		win = s.window(u, Core, now) // GET /rate_limit tells core's state, spending none
	}
	if ref := s.secondary(u, req, now); ref != nil {
		win.announce(head, u, req.resource)
		s.stats.Secondary++
		return ref, head
	}
	if req.resource != "" && win.used+req.units > win.limit {
		win.announce(head, u, req.resource)
		head.Set("X-RateLimit-Remaining", "0")
		s.stats.Primary++
		return primaryRefusal(u, req.graphQL), head
	}
	if req.resource != "" {
		win.used += req.units
	}
	s.spend(u, req, now)
	win.announce(head, u, req.resource)
	s.stats.Served++
	s.served = append(s.served, Arrival{At: now, Identity: u.login, Resource: req.resource, Units: req.units, Points: req.points, GraphQL: req.graphQL, Content: req.content, NotModified: req.notModified})
	return nil, head
}

// secondary returns the refusal of the first secondary limit the request
// would exceed, or nil.
func (s *Server) secondary(u *user, req request, now time.Time) *refusal {
	if u.inFlight > s.cfg.InFlight {
		return secondaryRefusal(false, 0)
	}
	points, limit := &u.rest, s.cfg.RESTPoints
	if req.graphQL {
		points, limit = &u.graphQL, s.cfg.GraphQLPoints
	}
	if wait := points.room(now, s.cfg.Minute, limit, req.points); wait > 0 {
		return secondaryRefusal(false, s.retryAfter(wait))
	}
	if !req.content {
		return nil
	}
	wait := max(u.content.room(now, s.cfg.Minute, s.cfg.ContentPerMinute, 1), u.contentH.room(now, s.cfg.Hour, s.cfg.ContentPerHour, 1))
	if wait > 0 {
		return secondaryRefusal(true, s.retryAfter(wait))
	}
	return nil
}

// retryAfter is the Retry-After of a refusal whose limit has room after
// wait: 0 (none sent) unless Config.RetryAfter.
func (s *Server) retryAfter(wait time.Duration) time.Duration {
	if !s.cfg.RetryAfter {
		return 0
	}
	return wait
}

// spend records the request's secondary points and content.
func (s *Server) spend(u *user, req request, now time.Time) {
	if req.graphQL {
		u.graphQL.add(now, req.points)
	} else {
		u.rest.add(now, req.points)
	}
	if req.content {
		u.content.add(now, 1)
		u.contentH.add(now, 1)
	}
}

// window returns the user's current window of resource, a new one when
// the last has reset. The caller holds s.mu.
func (s *Server) window(u *user, resource string, now time.Time) *fixedWindow {
	w := u.primary[resource]
	if w != nil && now.Before(w.reset) {
		return w
	}
	if w != nil {
		s.windows = append(s.windows, w.report(u.login, resource))
	}
	length, limit := s.cfg.Hour, s.cfg.Core
	switch {
	case resource == GraphQL:
		limit = s.cfg.GraphQL
	case resource == Search:
		length, limit = s.cfg.Minute, s.cfg.Search
	case resource == CodeSearch:
		length, limit = s.cfg.Minute, s.cfg.CodeSearch
	}
	if u.anon {
		switch resource {
		case Core:
			limit = s.cfg.AnonymousCore
		case Search:
			limit = s.cfg.AnonymousSearch
		}
	}
	w = newFixedWindow(now, length, limit)
	u.primary[resource] = w
	return w
}
