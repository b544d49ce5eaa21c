package ytsim

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Uploads. The methods that take a file (videos.insert, captions.insert
// and update, thumbnails.set, channelBanners.insert, playlistImages.insert
// and update, watermarks.set) are also served under /upload/youtube/v3/…
// and /resumable/upload/youtube/v3/…, the discovery document's simple and
// resumable upload paths. Google's Go client sends all three kinds of
// upload to /upload/…, with uploadType naming the kind:
//
//   - multipart: one request, a multipart/related body of the JSON
//     resource and the file. One call, charged once.
//   - media: one request, the file alone. One call, charged once.
//   - resumable: the request opens a session and is the call, charged
//     once; it is answered 200 with a Location header, the session URI
//     ("…?uploadType=resumable&upload_id=<id>" on the same server). The
//     file then goes to the session URI in chunks, which are not calls
//     and are never charged: an upload is one call, however many
//     requests carry its file.
//
// The protocol is YouTube's resumable upload guide,
// https://developers.google.com/youtube/v3/guides/using_resumable_upload_protocol,
// as Google's Go client speaks it (google.golang.org/api v0.309.0,
// internal/gensupport/resumable.go):
//
//   - A chunk is a PUT (the guide) or a POST (the Go client) with
//     Content-Range "bytes <first>-<last>/<total or *>"; a request with no
//     Content-Range carries the whole file (the guide's single PUT).
//   - "bytes */<total>" with an empty body asks for the upload's status,
//     or finishes it when the Server holds <total> bytes (the Go client's
//     empty last chunk); "bytes */*" only asks.
//   - While the file is incomplete the answer is 308 with
//     "Range: bytes=0-<last byte held>" (no Range while none is held). A
//     request with "X-GUploader-No-308: yes", which the Go client always
//     sends, gets 200 with "X-Http-Status-Code-Override: 308" instead, as
//     Google's upload server answers it; a 308 would make Go's
//     http.Client look for a redirect.
//   - When the last byte arrives the answer is 200 with the created
//     resource (204 for watermarks.set, which answers none). A session
//     asked again after that answers the same (Cloud Storage's upload
//     server does, per the cases recorded in googleapis/java-storage's
//     ITJsonResumableSessionPutTaskTest).
//
// What Google answers to a wrong Content-Range is documented for Cloud
// Storage's uploads, served by the same kind of front end as YouTube's
// (both answer with "Server: UploadServer"); the Server answers the same,
// assuming YouTube's does:
//
//   - A chunk that starts past the bytes held: 503 with the text "Invalid
//     request. According to the Content-Range header, the upload offset is
//     <first> byte(s), which exceeds already uploaded size of <held>
//     byte(s)." (googleapis/java-storage, the case above, recorded from
//     Cloud Storage in 2023). The session is kept.
//   - A chunk that starts at or before the bytes held is taken, its bytes
//     already held ignored: a chunk sent again after a lost answer is
//     harmless.
//   - A Content-Range that cannot be parsed: 400 with the text "Failed to
//     parse Content-Range header.", after which "your current resumable
//     upload is no longer active, and you must start a new resumable
//     upload" (https://cloud.google.com/storage/docs/troubleshooting). A
//     range whose last byte is past its total, or a total that differs
//     from one stated before, is refused the same way (assumed).
//   - A body whose length is not the range's: 400, the session kept
//     (assumed: no Google page says).
//   - A session URI that is unknown, expired (Config.UploadTTL; Cloud
//     Storage: "A resumable upload must be completed within a week of
//     being initiated", https://cloud.google.com/storage/docs/resumable-uploads)
//     or dead: 404 (Drive's upload guide: a 404 means the session "has
//     expired and the upload must be restarted from the beginning").
//
// The Server keeps a session's count of bytes, never the bytes.

// DefaultUploadTTL is how long a resumable upload session lives: a week,
// as Google's.
const DefaultUploadTTL = 7 * 24 * time.Hour

// sweepFloor is the fewest sessions held before expired ones are dropped.
const sweepFloor = 64

// session is one resumable upload.
type session struct {
	project  string
	method   string
	bucket   string
	held     int64 // bytes received: the file's bytes [0, held)
	total    int64 // the file's length, -1 until a request states it
	expires  time.Time
	done     bool
	resource reply // the answer once done
}

// upload serves the upload paths of the methods ms, which share a path
// and differ in HTTP method: requests to a session URI, and the three
// kinds of upload call.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, ms []*method) {
	q := r.URL.Query()
	if id := q.Get("upload_id"); id != "" && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
		s.chunk(w, r, id)
		return
	}
	var m *method
	for _, x := range ms {
		if x.verb == r.Method {
			m = x
		}
	}
	if m == nil {
		resource, _, _ := strings.Cut(ms[0].name, ".")
		allow := allowed(ms)
		s.serve(w, r, resource+"."+r.Method, charge{Pool, 1}, func(*call) reply { return methodNotAllowed(allow) })
		return
	}
	s.serve(w, r, m.name, s.prices[m.name], func(c *call) reply {
		switch t := q.Get("uploadType"); t {
		case "resumable":
			return s.open(c, m)
		case "multipart":
			meta, rep := readMultipart(r)
			if rep != nil {
				return *rep
			}
			return m.answer(r, meta, c.id)
		case "media":
			io.Copy(io.Discard, r.Body) // the file: only its arrival matters
			return m.answer(r, nil, c.id)
		case "":
			return apiError(http.StatusBadRequest, "global", "notUpload",
				"Requests to /upload/ must name an uploadType.", "uploadType")
		default:
			return apiError(http.StatusBadRequest, "global", "unsupportedMediaProtocol",
				fmt.Sprintf("Unsupported uploadType %q.", t), "uploadType")
		}
	})
}

// open answers the call that opens a resumable session: it holds the
// resource sent, to answer it when the file is complete, and points the
// client to the session URI.
func (s *Server) open(c *call, m *method) reply {
	total := int64(-1)
	if h := c.r.Header.Get("X-Upload-Content-Length"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return apiError(http.StatusBadRequest, "global", "badRequest",
				"Invalid X-Upload-Content-Length.", "")
		}
		total = n
	}
	done := m.answer(c.r, readResource(c.r), c.id)
	if done.status != http.StatusOK && done.status != http.StatusNoContent {
		return done // e.g. a resource that is not JSON
	}
	id := etag("upload", strconv.FormatUint(c.id, 10))

	s.mu.Lock()
	if len(s.sessions) >= s.sweepAt {
		for k, sess := range s.sessions {
			if !c.at.Before(sess.expires) {
				delete(s.sessions, k)
			}
		}
		s.sweepAt = max(2*len(s.sessions), sweepFloor)
	}
	s.sessions[id] = &session{
		project:  c.project,
		method:   m.name,
		bucket:   s.prices[m.name].bucket,
		total:    total,
		expires:  c.at.Add(s.uploadTTL),
		resource: done,
	}
	s.mu.Unlock()

	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	path := strings.TrimPrefix(c.r.URL.Path, "/resumable")
	loc := url.URL{Scheme: scheme, Host: c.r.Host, Path: path,
		RawQuery: url.Values{"uploadType": {"resumable"}, "upload_id": {id}}.Encode()}
	return reply{status: http.StatusOK, header: http.Header{"Location": {loc.String()}}}
}

// contentRange is a parsed Content-Range of a request to a session.
type contentRange struct {
	first, last int64 // the bytes carried, [first, last]; first -1: none (a status request)
	total       int64 // -1: "*"
}

// parseContentRange reads "bytes <first>-<last>/<total>", "bytes
// <first>-<last>/*", "bytes */<total>" or "bytes */*". A request without
// the header carries the whole file: n bytes of n.
func parseContentRange(h string, present bool, n int64) (contentRange, bool) {
	if !present {
		if n == 0 {
			return contentRange{first: -1, total: 0}, true
		}
		return contentRange{first: 0, last: n - 1, total: n}, true
	}
	spec, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return contentRange{}, false
	}
	rng, tot, ok := strings.Cut(spec, "/")
	if !ok {
		return contentRange{}, false
	}
	cr := contentRange{first: -1, total: -1}
	if tot != "*" {
		if cr.total, ok = parseOffset(tot); !ok {
			return contentRange{}, false
		}
	}
	if rng == "*" {
		return cr, true
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return contentRange{}, false
	}
	if cr.first, ok = parseOffset(a); !ok {
		return contentRange{}, false
	}
	if cr.last, ok = parseOffset(b); !ok || cr.last < cr.first {
		return contentRange{}, false
	}
	if cr.total >= 0 && cr.last >= cr.total {
		return contentRange{}, false // the last byte must lie in the file (RFC 9110, 14.4)
	}
	return cr, true
}

// parseOffset reads a byte offset: decimal digits only.
func parseOffset(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// chunk serves a request to the session id: a chunk or a status request.
// It is never charged, needs no key, and is recorded as a Chunk arrival.
func (s *Server) chunk(w http.ResponseWriter, r *http.Request, id string) {
	n, err := io.Copy(io.Discard, r.Body) // the bytes are counted, not kept
	h, present := r.Header["Content-Range"]
	var header string
	if present && len(h) > 0 {
		header = h[0]
	}
	cr, parsed := parseContentRange(header, present, n)
	no308 := r.Header.Get("X-GUploader-No-308") == "yes"

	s.mu.Lock()
	now := s.now()
	sess := s.sessions[id]
	if sess != nil && !now.Before(sess.expires) {
		delete(s.sessions, id)
		sess = nil
	}
	var rep reply
	switch {
	case sess == nil:
		rep = uploadError(http.StatusNotFound, "Not Found")
	case sess.done:
		rep = sess.resource
	case err != nil:
		rep = uploadError(http.StatusBadRequest, "Failed to read the request body.")
	case !parsed || sess.total >= 0 && (cr.total >= 0 && cr.total != sess.total || cr.first >= 0 && cr.last >= sess.total):
		delete(s.sessions, id) // "no longer active"
		rep = uploadError(http.StatusBadRequest, "Failed to parse Content-Range header.")
	case cr.first < 0 && n != 0 || cr.first >= 0 && cr.last-cr.first+1 != n:
		rep = uploadError(http.StatusBadRequest, fmt.Sprintf(
			"Invalid request. The request carries %d byte(s), not the %s the Content-Range header states.", n, carried(cr)))
	case cr.first > sess.held:
		rep = uploadError(http.StatusServiceUnavailable, fmt.Sprintf(
			"Invalid request. According to the Content-Range header, the upload offset is %d byte(s), which exceeds already uploaded size of %d byte(s).",
			cr.first, sess.held))
	default:
		if cr.first >= 0 {
			sess.held = max(sess.held, cr.last+1)
		}
		if cr.total >= sess.held {
			sess.total = cr.total // a smaller total is only answered with what is held
		}
		if sess.total >= 0 && sess.held == sess.total {
			sess.done = true
			rep = sess.resource
		} else {
			rep = incomplete(sess.held, no308)
		}
	}
	a := Arrival{At: now, Status: rep.status, Chunk: true}
	if sess != nil {
		a.Project, a.Method, a.Bucket = sess.project, sess.method, sess.bucket
	}
	s.arrivals = append(s.arrivals, a)
	s.mu.Unlock()

	s.wait(r.Context())
	rep.write(w)
}

// carried describes the bytes a range says it carries.
func carried(cr contentRange) string {
	if cr.first < 0 {
		return "0 bytes"
	}
	return strconv.FormatInt(cr.last-cr.first+1, 10) + " byte(s)"
}

// incomplete answers a request to a session whose file is not complete:
// 308 Resume Incomplete with the bytes held, or, for a client that sent
// "X-GUploader-No-308: yes", 200 saying 308 in a header.
func incomplete(held int64, no308 bool) reply {
	rep := reply{status: http.StatusPermanentRedirect, header: http.Header{}}
	if held > 0 {
		rep.header.Set("Range", "bytes=0-"+strconv.FormatInt(held-1, 10))
	}
	if no308 {
		rep.status = http.StatusOK
		rep.header.Set("X-Http-Status-Code-Override", "308")
	}
	return rep
}

// uploadError is an error of the upload protocol: plain text, as Google's
// upload server sends them.
func uploadError(status int, text string) reply {
	return reply{status: status, contentType: "text/plain; charset=utf-8", body: []byte(text)}
}

// readResource reads the JSON resource a call sends, up to maxResource
// bytes (a longer body is read to its end and answered without its
// fields).
func readResource(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxResource+1)) // a broken body reads short
	if len(b) > maxResource {
		io.Copy(io.Discard, r.Body)
		return nil
	}
	return b
}

// readMultipart reads a multipart/related upload: the resource (the first
// part, JSON) and the file (the second), which it only reads through.
func readMultipart(r *http.Request) ([]byte, *reply) {
	bad := func() ([]byte, *reply) {
		io.Copy(io.Discard, r.Body)
		rep := apiError(http.StatusBadRequest, "global", "badContent",
			"The multipart body of the upload cannot be read.", "")
		return nil, &rep
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return bad()
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var meta []byte
	for i := 0; ; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bad()
		}
		if i == 0 {
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, io.LimitReader(p, maxResource+1)); err != nil {
				return bad()
			}
			if buf.Len() <= maxResource {
				meta = buf.Bytes()
			}
		}
		if _, err := io.Copy(io.Discard, p); err != nil {
			return bad()
		}
	}
	return meta, nil
}
