package github

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/ghsim"
)

// closeCounter counts the closes of a request body.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// A GraphQL request that cannot be priced fails with a clear error before
// anything is sent, and its body is closed; hostile Authorization values
// and methods GitHub does not use are metered like any other request,
// never a panic.
func TestBadInput(t *testing.T) {
	r := newRig(t, ghsim.Config{})
	tr := r.transport(t, Options{})
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `query { viewer { login } }`, "not a JSON request"},
		{"no query", `{"variables": {"n": 1}}`, "no query"},
		{"not GraphQL", `{"query": "{ viewer { login }"}`, "syntax error"},
		{"a variable that is an object", `{"query": "query($n: Int) { a(first: $n) { id } }", "variables": {"n": {"x": 1}}}`, ""},
		{"absurd page sizes", `{"query": "{ a(first: 1e999, last: -99999999999999999999) { b(first: 100000) { id } } }"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := r.sim.Stats().Served
			body := &closeCounter{Reader: strings.NewReader(c.body)}
			req, _ := http.NewRequest("POST", r.api.URL+"/graphql", body)
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := tr.RoundTrip(req)
			if c.want == "" {
				// Priced at the most a page allows where the query says
				// nothing usable; sent.
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if served := r.sim.Stats().Served - before; served != 1 {
					t.Errorf("%d requests reached GitHub, want 1", served)
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip sent it (status %d); want an error saying %q", resp.StatusCode, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one saying %q", err, c.want)
			}
			if body.closed == 0 {
				t.Error("the request's body was left open")
			}
			if served := r.sim.Stats().Served - before; served != 0 {
				t.Errorf("%d requests reached GitHub", served)
			}
		})
	}
	for _, c := range []struct {
		auth  string
		valid bool // net/http sends it
	}{
		{"Bearer", true}, {"token ", true}, {"Basic !!!", true}, {strings.Repeat("x", 64<<10), true}, {"  ", true},
		{"Bearer s3cr3t\x7f\u00e9\u2028", false},
	} {
		req, _ := http.NewRequest("GET", r.api.URL+"/repos/o/r", nil)
		req.Header["Authorization"] = []string{c.auth}
		resp, err := tr.RoundTrip(req)
		switch {
		case err == nil:
			resp.Body.Close()
		case c.valid:
			t.Errorf("Authorization %.20q: %v", c.auth, err)
		case strings.Contains(err.Error(), "s3cr3t"):
			t.Errorf("the error shows the credential: %v", err)
		}
	}
	for _, method := range []string{"PROPFIND", "TRACE", "PATCH"} {
		req, _ := http.NewRequest(method, r.api.URL+"/repos/o/r", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: %v", method, err)
			continue
		}
		resp.Body.Close()
	}
	if st := r.sim.Stats(); st.Primary+st.Secondary != 0 {
		t.Errorf("GitHub refused requests: %+v", st)
	}
}
