package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

//go:embed page.html style.css refresh.js
var assets embed.FS

// Limits on what an operator submits.
const (
	// MaxBy is the longest name an operator may give, in bytes.
	MaxBy = 64
	// MaxReason is the longest reason a pause may carry, in bytes (as
	// quota.MaxReason).
	MaxReason = 200
	// MaxPause is the longest pause, from the page as from the pause
	// command: 7 days. A longer one is a mistake more often than not
	// (2562047h is accepted by Go's durations), and it outlives anyone's
	// memory of why.
	MaxPause = 7 * 24 * time.Hour
	maxForm  = 8 << 10
	// maxWrongTokens wrong operator tokens within wrongTokenWindow make
	// the page refuse every token, the right one too, with 429 until the
	// oldest of them is that old.
	maxWrongTokens   = 5
	wrongTokenWindow = time.Minute
)

// Options configure a Server.
type Options struct {
	// Read reads the Page to show; it is called once per page request,
	// with the request's context. Required. With an error, which the page
	// shows as its one line (write it as a sentence for people), it may
	// return a Page too, whose At and Prefix the page shows.
	Read func(ctx context.Context) (*Page, error)
	// Control pauses and resumes. Nil, or an empty Token, makes the page
	// read-only: it shows no buttons and refuses every POST.
	Control Control
	// Token is the operator token (the command reads it from
	// TOLLGATE_OPERATOR_TOKEN). "" makes the page read-only.
	Token string
	// Record, when set, receives each action done from the page (the
	// record of operators' actions). Each is logged on Log as well.
	Record Recorder
	// Log receives a line per action and per failure; nil discards them.
	// Never the token.
	Log *slog.Logger
	// Refresh is how often the page reloads itself; 0 means 5 seconds.
	Refresh time.Duration
	// Loopback says the server listens on loopback only: a request that
	// names another host than localhost or a loopback address (a page of
	// another site whose name was pointed at 127.0.0.1, DNS rebinding) is
	// refused with 421.
	Loopback bool
}

// Server serves the page: GET / and its two assets, POST /pause and POST
// /resume. It is safe for concurrent use.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	page  *template.Template
	csrf  string   // this server's form token, random per start
	token [32]byte // SHA-256 of Options.Token
	cop   *http.CrossOriginProtection
	style []byte
	code  []byte

	mu    sync.Mutex
	wrong []time.Time // the last wrong operator tokens, oldest first
}

// guessing reports whether too many wrong operator tokens came lately,
// and how long until one more may be tried.
func (s *Server) guessing(now time.Time) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.wrong) > 0 && now.Sub(s.wrong[0]) >= wrongTokenWindow {
		s.wrong = s.wrong[1:]
	}
	if len(s.wrong) < maxWrongTokens {
		return false, 0
	}
	return true, wrongTokenWindow - now.Sub(s.wrong[0])
}

// wrongToken records a wrong operator token.
func (s *Server) wrongToken(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrong = append(s.wrong, now)
	if len(s.wrong) > maxWrongTokens {
		s.wrong = s.wrong[len(s.wrong)-maxWrongTokens:]
	}
}

// New builds a Server; it fails when Read is missing.
func New(opts Options) (*Server, error) {
	if opts.Read == nil {
		return nil, errors.New("web: Options.Read is required")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s := &Server{opts: opts, csrf: hex.EncodeToString(nonce[:]), token: sha256.Sum256([]byte(opts.Token)),
		cop: http.NewCrossOriginProtection()}
	var err error
	s.page, err = template.New("page.html").Funcs(template.FuncMap{
		"when":  when,
		"chart": drawWindow,
		"pct": func(used, limit int64) int64 {
			if limit <= 0 {
				return 0
			}
			return used * 100 / limit
		},
		"target": target,
		"sub":    func(a, b int64) int64 { return a - b },
		"args": func(v view, scope, bucket string, p *Pause) actionForm {
			return actionForm{CSRF: v.CSRF, Scope: scope, Bucket: bucket, Paused: p != nil}
		},
	}).ParseFS(assets, "page.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if s.style, err = assets.ReadFile("style.css"); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if s.code, err = assets.ReadFile("refresh.js"); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.serveHTML)
	s.mux.HandleFunc("GET /style.css", s.asset("text/css; charset=utf-8", s.style))
	s.mux.HandleFunc("GET /refresh.js", s.asset("text/javascript; charset=utf-8", s.code))
	s.mux.HandleFunc("POST /pause", s.act("pause"))
	s.mux.HandleFunc("POST /resume", s.act("resume"))
	return s, nil
}

// writable reports that the page may pause and resume.
func (s *Server) writable() bool { return s.opts.Token != "" && s.opts.Control != nil }

// ServeHTTP serves the page; every answer forbids framing and any
// resource from elsewhere.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if s.opts.Loopback && !loopbackHost(r.Host) {
		refuse(w, http.StatusMisdirectedRequest, "this server answers to localhost only")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports a Host header naming this machine: localhost (or a
// name under it) or a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (s *Server) asset(kind string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", kind)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

// view is what page.html executes.
type view struct {
	*Page
	Err      string
	Writable bool
	CSRF     string
	Refresh  int // seconds
	Now      time.Time
}

// actionForm is what the pause and resume forms of a scope or a bucket
// carry.
type actionForm struct {
	CSRF, Scope, Bucket string
	Paused              bool
}

func (s *Server) serveHTML(w http.ResponseWriter, r *http.Request) {
	v := view{Writable: s.writable(), CSRF: s.csrf, Refresh: int(s.opts.Refresh / time.Second)}
	v.Refresh = max(v.Refresh, 1)
	p, err := s.opts.Read(r.Context())
	status := http.StatusOK
	if err != nil {
		// Shown, not fatal: the page reloads and Redis may come back.
		v.Err = oneLine(err.Error())
		if p == nil {
			p = &Page{At: time.Now()}
		}
		p.Scopes, p.Actions, status = nil, nil, http.StatusServiceUnavailable
		s.opts.Log.Warn("tollgate web: reading the quotas failed", "err", v.Err)
	}
	v.Page, v.Now = p, p.At
	var b bytes.Buffer
	if err := s.page.Execute(&b, v); err != nil {
		s.opts.Log.Error("tollgate web: rendering the page failed", "err", err)
		http.Error(w, "tollgate web: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// refuse answers a refused POST with its status and one line.
func refuse(w http.ResponseWriter, status int, msg string) {
	http.Error(w, "tollgate web: "+msg, status)
}

// act handles POST /pause and POST /resume: read-only, cross-origin, a
// missing or wrong form token or operator token are refused with 403
// before the form is read further; bad input with 400; then the action is
// done, recorded, and the browser sent back to the page (303).
func (s *Server) act(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.writable() {
			refuse(w, http.StatusForbidden, "read-only: the server has no operator token (TOLLGATE_OPERATOR_TOKEN)")
			return
		}
		if err := s.cop.Check(r); err != nil {
			refuse(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			refuse(w, http.StatusBadRequest, "unreadable form")
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
			refuse(w, http.StatusForbidden, "missing or stale form token: reload the page")
			return
		}
		if limited, wait := s.guessing(time.Now()); limited {
			w.Header().Set("Retry-After", strconv.Itoa(max(int(wait.Seconds()+0.999), 1)))
			s.opts.Log.Warn("tollgate web: "+what+" refused: too many wrong operator tokens lately", "from", r.RemoteAddr)
			refuse(w, http.StatusTooManyRequests, "too many wrong operator tokens lately: wait before trying again")
			return
		}
		// Hashes of equal length: the comparison tells nothing of the
		// token's length either.
		sent := sha256.Sum256([]byte(r.PostForm.Get("token")))
		if r.PostForm.Get("token") == "" || subtle.ConstantTimeCompare(sent[:], s.token[:]) != 1 {
			if r.PostForm.Get("token") != "" {
				s.wrongToken(time.Now())
			}
			refuse(w, http.StatusForbidden, "wrong or missing operator token")
			return
		}
		a, err := readAction(r, what)
		if err != nil {
			refuse(w, http.StatusBadRequest, err.Error())
			return
		}
		if what == "pause" {
			err = s.opts.Control.Pause(r.Context(), a.Scope, a.Bucket, a.For, a.Why)
		} else {
			err = s.opts.Control.Resume(r.Context(), a.Scope, a.Bucket)
		}
		if err != nil {
			s.opts.Log.Warn("tollgate web: "+what+" failed", "by", a.By, "via", a.Via, "scope", a.Scope, "bucket", a.Bucket, "err", oneLine(err.Error()))
			refuse(w, http.StatusBadGateway, what+" failed: "+oneLine(err.Error()))
			return
		}
		a.At = time.Now()
		s.opts.Log.Info("tollgate web: "+what, "by", a.By, "via", a.Via, "scope", a.Scope, "bucket", a.Bucket, "for", a.For, "reason", a.Why)
		if s.opts.Record != nil {
			if err := s.opts.Record(r.Context(), a); err != nil {
				s.opts.Log.Warn("tollgate web: recording the action failed", "what", what, "err", oneLine(err.Error()))
			}
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// readAction reads and checks the form of a pause or a resume.
func readAction(r *http.Request, what string) (Action, error) {
	f := r.PostForm
	a := Action{What: what, Via: "web " + r.RemoteAddr, By: strings.TrimSpace(f.Get("by")),
		Scope: f.Get("scope"), Bucket: f.Get("bucket"), Why: strings.TrimSpace(f.Get("reason"))}
	switch {
	case a.By == "":
		return a, errors.New("say who you are (the by field)")
	case len(a.By) > MaxBy || !plain(a.By):
		return a, fmt.Errorf("by: at most %d bytes of plain text", MaxBy)
	case a.Scope == "":
		return a, errors.New("no scope")
	case !plain(a.Scope) || !plain(a.Bucket):
		return a, errors.New("scope and bucket must be plain text")
	}
	if what == "resume" {
		if len(a.Why) > MaxReason || !plain(a.Why) {
			return a, fmt.Errorf("reason: at most %d bytes of plain text", MaxReason)
		}
		return a, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(f.Get("for")))
	switch {
	case err != nil || d <= 0:
		return a, errors.New("for: a positive duration, e.g. 30m")
	case d > MaxPause:
		return a, fmt.Errorf("for: at most %v: pause again when it ends", MaxPause)
	case a.Why == "":
		return a, errors.New("reason: say why, for the others who see it")
	case len(a.Why) > MaxReason || !plain(a.Why):
		return a, fmt.Errorf("reason: at most %d bytes of plain text", MaxReason)
	}
	a.For = d
	return a, nil
}

// plain reports text with no control characters, valid UTF-8.
func plain(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}

// when shows an instant in zone (UTC when nil) and how far it is from
// now, e.g. "09:30:00 UTC (in 30m0s)"; with its date when not on now's day.
func when(t, now time.Time, zone *time.Location) string {
	if t.IsZero() {
		return "–"
	}
	if zone == nil {
		zone = time.UTC
	}
	layout := "15:04:05 MST"
	lt, ln := t.In(zone), now.In(zone)
	if lt.YearDay() != ln.YearDay() || lt.Year() != ln.Year() {
		layout = "2006-01-02 15:04:05 MST"
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return lt.Format(layout) + " (in " + d.String() + ")"
	case d < 0:
		return lt.Format(layout) + " (" + (-d).String() + " ago)"
	}
	return lt.Format(layout) + " (now)"
}

// target names what a pause applies to.
func target(scope, bucket string) string {
	if bucket == "" {
		return "scope " + scope
	}
	return "bucket " + bucket + " of " + scope
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
