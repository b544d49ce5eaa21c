package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// issuesPerRepo is how many issues every repository holds, for lists
// that take several pages.
const issuesPerRepo = 250

// restRequest returns what a REST request counts against: its resource
// (search, code_search, none for GET /rate_limit, else core), its
// secondary points (1 for GET, HEAD, OPTIONS, 5 for the other methods) and
// whether it creates content (every POST but /markdown).
func restRequest(r *http.Request) request {
	req := request{resource: Core, units: 1, points: 5}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		req.points = 1
	case http.MethodPost:
		req.content = !strings.HasPrefix(r.URL.Path, "/markdown")
	}
	switch p := r.URL.Path; {
	case p == "/search/code":
		req.resource = CodeSearch
	case strings.HasPrefix(p, "/search/"):
		req.resource = Search
	case p == "/rate_limit":
		req.resource, req.units = "", 0
	}
	return req
}

// serveREST answers a REST request that was admitted.
func (s *Server) serveREST(w http.ResponseWriter, r *http.Request, u *user, head http.Header) {
	for k, v := range head {
		w.Header()[k] = v
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case u.anon && (r.URL.Path == "/user" || r.URL.Path == "/search/code"):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest"})
	case len(parts) >= 2 && parts[0] == "repos" && parts[1] == "forbidden":
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by personal access token", "documentation_url": "https://docs.github.com/rest"})
	case get && r.URL.Path == "/user":
		writeJSON(w, http.StatusOK, map[string]any{"login": u.login, "id": u.id})
	case get && len(parts) == 2 && parts[0] == "users":
		writeJSON(w, http.StatusOK, map[string]any{"login": parts[1], "id": len(parts[1])})
	case get && len(parts) == 3 && parts[0] == "repos":
		writeJSON(w, http.StatusOK, repo(parts[1], parts[2]))
	case get && len(parts) == 4 && parts[0] == "repos" && parts[3] == "issues":
		s.listIssues(w, r, parts[1], parts[2])
	case r.Method == http.MethodPost && len(parts) == 4 && parts[0] == "repos" && parts[3] == "issues":
		s.createIssue(w, r, parts[1], parts[2])
	case get && strings.HasPrefix(r.URL.Path, "/search/"):
		search(w, r)
	case get && r.URL.Path == "/rate_limit":
		s.rateLimit(w, u)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
	}
}

func repo(owner, name string) map[string]any {
	return map[string]any{"id": len(owner)*1000 + len(name), "name": name, "full_name": owner + "/" + name,
		"owner": map[string]any{"login": owner}, "open_issues_count": issuesPerRepo}
}

// listIssues answers a page of a repository's issues, with the Link
// header of GitHub's pagination
// (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api).
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request, owner, name string) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	if perPage <= 0 || perPage > 100 {
		perPage = 30
	}
	s.mu.Lock()
	total := issuesPerRepo + s.issues[owner+"/"+name]
	s.mu.Unlock()
	last := max((total+perPage-1)/perPage, 1)
	page = min(max(page, 1), last+1)
	var items []map[string]any
	for n := (page-1)*perPage + 1; n <= min(page*perPage, total); n++ {
		items = append(items, map[string]any{"number": n, "title": fmt.Sprintf("issue %d", n), "state": "open"})
	}
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		v := url.Values{"page": {strconv.Itoa(p)}, "per_page": {strconv.Itoa(perPage)}}
		u.RawQuery = v.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	if items == nil {
		items = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, items)
}

// createIssue answers POST /repos/{owner}/{repo}/issues with the new
// issue.
func (s *Server) createIssue(w http.ResponseWriter, r *http.Request, owner, name string) {
	var in struct {
		Title string `json:"title"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed", "documentation_url": "https://docs.github.com/rest/issues/issues#create-an-issue"})
		return
	}
	s.mu.Lock()
	s.issues[owner+"/"+name]++
	n := issuesPerRepo + s.issues[owner+"/"+name]
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"number": n, "title": in.Title, "state": "open"})
}

// search answers a search with one page of synthetic results.
func search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	var items []map[string]any
	for i := range 3 {
		items = append(items, map[string]any{"number": i + 1, "name": fmt.Sprintf("%s-%d", q, i), "title": q})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(items), "incomplete_results": false, "items": items})
}

// rateLimit answers GET /rate_limit with the user's windows.
func (s *Server) rateLimit(w http.ResponseWriter, u *user) {
	s.mu.Lock()
	resources := map[string]any{}
	for name, win := range u.primary {
		resources[name] = map[string]int64{"limit": win.limit, "used": win.used, "remaining": max(win.limit-win.used, 0), "reset": resetSecond(win.reset)}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"resources": resources, "rate": resources[Core]})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
