package ytsim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// reply is an answer ready to write.
type reply struct {
	status      int
	body        []byte
	contentType string      // "" means JSON when there is a body
	header      http.Header // more headers, e.g. Location; may be nil
	allow       string      // the Allow header of a 405
}

// jsonReply encodes v as Google does: compact, with <, > and & escaped
// (\u003c, \u003e, \u0026), so the quota message's link reads
// "\u003ca href=…" on the wire, as in the bodies captured from the API.
func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		// Unreachable with the types of this package; answer like a
		// broken backend rather than panic in a test server.
		return apiError(http.StatusInternalServerError, "global", "backendError",
			"ytsim: encode answer: "+err.Error(), "")
	}
	return reply{status: status, body: b}
}

func (rep reply) write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range rep.header {
		h[k] = vs
	}
	switch {
	case rep.contentType != "":
		h.Set("Content-Type", rep.contentType)
	case len(rep.body) > 0:
		h.Set("Content-Type", "application/json; charset=UTF-8")
	}
	if rep.allow != "" {
		h.Set("Allow", rep.allow)
	}
	w.WriteHeader(rep.status)
	w.Write(rep.body) // the client may be gone; nothing to do about it
}

// errorBody is Google's JSON error shape. Field order matters: it is the
// order on the wire.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Errors  []errorItem `json:"errors"`
}

type errorItem struct {
	Message      string `json:"message"`
	Domain       string `json:"domain"`
	Reason       string `json:"reason"`
	Location     string `json:"location,omitempty"`     // the parameter at fault, e.g. "maxResults"
	LocationType string `json:"locationType,omitempty"` // "parameter" when Location is set
}

// apiError answers with one error in Google's shape. location names the
// query parameter at fault, or is empty. Messages must never contain the
// API key.
func apiError(code int, domain, reason, message, location string) reply {
	item := errorItem{Message: message, Domain: domain, Reason: reason}
	if location != "" {
		item.Location, item.LocationType = location, "parameter"
	}
	return jsonReply(code, errorBody{errorDetail{Code: code, Message: message, Errors: []errorItem{item}}})
}

// badParameter answers 400 for a query parameter.
func badParameter(reason, message, location string) reply {
	domain := "youtube.parameter"
	if reason == "required" {
		domain = "global"
	}
	return apiError(http.StatusBadRequest, domain, reason, message, location)
}

// notFound answers a path the API does not have. It does not repeat the
// path: its query may hold the key.
func notFound(*http.Request) reply {
	return apiError(http.StatusNotFound, "global", "notFound", "Not Found", "")
}

// methodNotAllowed answers an HTTP method that a path of the API lacks;
// allow lists the ones it has, e.g. "GET, HEAD".
func methodNotAllowed(allow string) reply {
	rep := apiError(http.StatusMethodNotAllowed, "global", "methodNotAllowed",
		"The HTTP method is not supported by this resource.", "")
	rep.allow = allow
	return rep
}

// listResponse is the envelope of every list method.
type listResponse struct {
	Kind          string   `json:"kind"`
	Etag          string   `json:"etag"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
	PrevPageToken string   `json:"prevPageToken,omitempty"`
	RegionCode    string   `json:"regionCode,omitempty"` // search.list only
	PageInfo      pageInfo `json:"pageInfo"`
	Items         any      `json:"items"` // a non-nil slice, so "[]" when empty
}

type pageInfo struct {
	TotalResults   int `json:"totalResults"`
	ResultsPerPage int `json:"resultsPerPage"`
}

// page is one page of a list of total results.
type page struct {
	offset, end int    // results [offset, end)
	next, prev  string // page tokens; empty when there is no such page
}

// paginate reads pageToken and cuts a page of size results. With size 0 there
// is no next page, or a client following nextPageToken would loop forever.
func paginate(q url.Values, total, size int) (page, *reply) {
	offset := 0
	if tok := q.Get("pageToken"); tok != "" {
		var ok bool
		if offset, ok = decodePageToken(tok, total); !ok {
			rep := badParameter("invalidPageToken", "The request specifies an invalid page token.", "pageToken")
			return page{}, &rep
		}
	}
	p := page{offset: offset, end: min(offset+size, total)}
	if size > 0 && p.end < total {
		p.next = encodePageToken(p.end)
	}
	if size > 0 && offset > 0 {
		p.prev = encodePageToken(max(offset-size, 0))
	}
	return p, nil
}

// Page tokens are opaque to clients: base64url of "p:<offset>".
func encodePageToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("p:" + strconv.Itoa(offset)))
}

// decodePageToken returns the offset of tok, which must lie in [0, total).
func decodePageToken(tok string, total int) (int, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(string(b), "p:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= total || strconv.Itoa(n) != s {
		return 0, false // strconv.Itoa(n) != s: one offset, one token
	}
	return n, true
}

// parseParts reads the required part parameter: a comma-separated list of
// names from allowed.
func parseParts(q url.Values, allowed ...string) (map[string]bool, *reply) {
	raw := q.Get("part")
	if strings.TrimSpace(raw) == "" {
		rep := badParameter("required", "Required parameter: part", "part")
		return nil, &rep
	}
	parts := make(map[string]bool)
	for _, p := range strings.Split(raw, ",") {
		p = strings.TrimSpace(p)
		ok := false
		for _, a := range allowed {
			ok = ok || p == a
		}
		if !ok {
			rep := badParameter("unknownPart", fmt.Sprintf("%q", p), "part")
			return nil, &rep
		}
		parts[p] = true
	}
	return parts, nil
}

// parseMaxResults reads maxResults, which must be an integer in [lo, hi].
func parseMaxResults(q url.Values, lo, hi, def int) (int, *reply) {
	if !q.Has("maxResults") {
		return def, nil
	}
	raw := q.Get("maxResults")
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		rep := badParameter("invalidParameter",
			fmt.Sprintf("Invalid value %q for maxResults: it must be an integer from %d to %d.", raw, lo, hi), "maxResults")
		return 0, &rep
	}
	return n, nil
}

// parseRegion reads regionCode: two ASCII letters, "US" by default.
func parseRegion(q url.Values) (string, *reply) {
	if !q.Has("regionCode") {
		return "US", nil
	}
	raw := q.Get("regionCode")
	code := strings.ToUpper(raw)
	if len(code) != 2 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' {
		rep := badParameter("invalidRegionCode",
			fmt.Sprintf("Invalid value %q for regionCode: it must be a two-letter country code.", raw), "regionCode")
		return "", &rep
	}
	return code, nil
}

// parseIDs reads a comma-separated id parameter of at most 50 ids; empty
// entries are skipped.
func parseIDs(q url.Values) ([]string, *reply) {
	var ids []string
	for _, id := range strings.Split(q.Get("id"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) > maxIDs {
		rep := badParameter("invalidParameter",
			fmt.Sprintf("The id parameter names %d ids; at most %d are allowed.", len(ids), maxIDs), "id")
		return nil, &rep
	}
	return ids, nil
}

// maxIDs is the most ids one list call may name, and the largest page.
const maxIDs = 50

// videosList answers videos.list: the mostPopular chart of a region, or
// videos by id (unknown ids are left out, as on YouTube).
func videosList(r *http.Request) reply {
	q := r.URL.Query()
	parts, rep := parseParts(q, "id", "snippet", "statistics")
	if rep != nil {
		return *rep
	}
	switch {
	case q.Has("chart") && q.Has("id"):
		return badParameter("incompatibleParameters",
			"Incompatible parameters specified in the request: chart, id", "")
	case q.Has("id"):
		ids, rep := parseIDs(q)
		if rep != nil {
			return *rep
		}
		items := []video{}
		for _, id := range ids {
			if v, ok := parseVideoID(id); ok {
				items = append(items, v.resource(parts))
			}
		}
		return jsonReply(http.StatusOK, listResponse{
			Kind:     "youtube#videoListResponse",
			Etag:     listEtag("videos", "", items),
			PageInfo: pageInfo{TotalResults: len(items), ResultsPerPage: len(items)},
			Items:    items,
		})
	case q.Has("chart"):
		if c := q.Get("chart"); c != "mostPopular" {
			return badParameter("invalidChart",
				fmt.Sprintf("Invalid value %q for chart: the simulator knows mostPopular.", c), "chart")
		}
		region, rep := parseRegion(q)
		if rep != nil {
			return *rep
		}
		perPage, rep := parseMaxResults(q, 1, maxIDs, 5)
		if rep != nil {
			return *rep
		}
		p, rep := paginate(q, videosPerRegion, perPage)
		if rep != nil {
			return *rep
		}
		items := []video{}
		for i := p.offset; i < p.end; i++ {
			items = append(items, videoRef{region, i}.resource(parts))
		}
		return jsonReply(http.StatusOK, listResponse{
			Kind:          "youtube#videoListResponse",
			Etag:          listEtag("videos", p.next+" "+p.prev, items),
			NextPageToken: p.next,
			PrevPageToken: p.prev,
			PageInfo:      pageInfo{TotalResults: videosPerRegion, ResultsPerPage: perPage},
			Items:         items,
		})
	default:
		return badParameter("missingRequiredParameter",
			"No filter selected. Expected one of: chart, id", "")
	}
}

// channelsList answers channels.list by id; ids that are not channel ids
// are left out, as on YouTube. Any well-formed channel id exists.
func channelsList(r *http.Request) reply {
	q := r.URL.Query()
	parts, rep := parseParts(q, "id", "snippet", "statistics")
	if rep != nil {
		return *rep
	}
	ids, rep := parseIDs(q)
	if rep != nil {
		return *rep
	}
	if len(ids) == 0 {
		return badParameter("missingRequiredParameter", "No filter selected. Expected one of: id", "id")
	}
	items := []channel{}
	for _, id := range ids {
		if validChannelID(id) {
			items = append(items, channelResource(id, parts))
		}
	}
	return jsonReply(http.StatusOK, listResponse{
		Kind:     "youtube#channelListResponse",
		Etag:     listEtag("channels", "", items),
		PageInfo: pageInfo{TotalResults: len(items), ResultsPerPage: len(items)},
		Items:    items,
	})
}

// searchList answers search.list. Results are the region's chart videos
// (or, for type=channel, its channels) in an order fixed by q; a
// playlist-only search finds nothing.
func searchList(r *http.Request) reply {
	q := r.URL.Query()
	parts, rep := parseParts(q, "id", "snippet")
	if rep != nil {
		return *rep
	}
	region, rep := parseRegion(q)
	if rep != nil {
		return *rep
	}
	perPage, rep := parseMaxResults(q, 0, maxIDs, 5)
	if rep != nil {
		return *rep
	}
	types := map[string]bool{"video": true, "channel": true, "playlist": true}
	if raw := q.Get("type"); raw != "" {
		types = map[string]bool{}
		for _, t := range strings.Split(raw, ",") {
			t = strings.TrimSpace(t)
			if t != "video" && t != "channel" && t != "playlist" {
				return badParameter("invalidParameter",
					fmt.Sprintf("Invalid value %q for type: expected video, channel or playlist.", t), "type")
			}
			types[t] = true
		}
	}
	total := 0
	switch {
	case types["video"]:
		total = videosPerRegion
	case types["channel"]:
		total = channelsPerRegion
	}
	p, rep := paginate(q, total, perPage)
	if rep != nil {
		return *rep
	}
	items := []searchResult{}
	for k := p.offset; k < p.end; k++ {
		i := searchOrder(region, q.Get("q"), total, k)
		if types["video"] {
			items = append(items, videoRef{region, i}.searchResult(parts))
		} else {
			items = append(items, channelSearchResult(regionChannelID(region, i), parts))
		}
	}
	return jsonReply(http.StatusOK, listResponse{
		Kind:          "youtube#searchListResponse",
		Etag:          listEtag("search", p.next+" "+p.prev, items),
		NextPageToken: p.next,
		PrevPageToken: p.prev,
		RegionCode:    region,
		PageInfo:      pageInfo{TotalResults: total, ResultsPerPage: perPage},
		Items:         items,
	})
}
