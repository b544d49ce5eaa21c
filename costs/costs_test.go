package costs

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func testSpec() Spec {
	return Spec{
		Buckets: []string{"pool", "search"},
		Rules: []Rule{
			{Pattern: "GET api.example.com/v1/items", Endpoint: "items.list", Charges: []Charge{{"pool", 1}}},
			{Pattern: "POST api.example.com/v1/items", Endpoint: "items.insert", Charges: []Charge{{"pool", 50}}},
			{Pattern: "GET api.example.com/v1/search", Endpoint: "search", Charges: []Charge{{"pool", 100}, {"search", 1}}},
			{Pattern: "GET old.example.com/v1/search", Endpoint: "search", Charges: []Charge{{"pool", 100}, {"search", 1}}},
			{Pattern: "api.example.com/v1/items/{id}/rate", Endpoint: "items.rate", Charges: []Charge{{"pool", 5}}},
			{Pattern: "/v1/status", Endpoint: "status", Charges: []Charge{{"pool", 1}}},
			{Pattern: "GET api.example.com/v1/report", Endpoint: "report", Func: func(r *http.Request) (Endpoint, error) {
				if r.URL.Query().Get("detail") == "full" {
					return Endpoint{Charges: []Charge{{"pool", 20}}}, nil
				}
				return Endpoint{Charges: []Charge{{"pool", 2}}}, nil
			}},
		},
	}
}

func mustNew(t *testing.T, s Spec) *Table {
	t.Helper()
	tab, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestResolve(t *testing.T) {
	tab := mustNew(t, testSpec())
	cases := []struct {
		method, url string
		endpoint    string
		units       int64
	}{
		{"GET", "https://api.example.com/v1/items?page=2", "items.list", 1},
		{"HEAD", "https://api.example.com/v1/items", "items.list", 1}, // GET patterns match HEAD
		{"POST", "https://api.example.com/v1/items", "items.insert", 50},
		{"GET", "https://api.example.com/v1/search?q=x", "search", 101},
		{"GET", "https://old.example.com/v1/search", "search", 101},
		{"GET", "https://api.example.com:8443/v1/search", "search", 101}, // the port is not part of the host
		{"DELETE", "https://api.example.com/v1/items/42/rate", "items.rate", 5},
		{"GET", "https://anything.example.net/v1/status", "status", 1}, // no host in the pattern
		{"GET", "https://api.example.com/v1//items", "items.list", 1},  // unclean paths match their clean form
		{"GET", "https://api.example.com/v1/report", "report", 2},
		{"GET", "https://api.example.com/v1/report?detail=full", "report", 20},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.url, nil)
		req.Host = "" // a client request: the URL names the host
		e, err := tab.Resolve(req)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.url, err)
			continue
		}
		if e.Name != c.endpoint || e.Units() != c.units {
			t.Errorf("%s %s = %s (%d units), want %s (%d units)", c.method, c.url, e.Name, e.Units(), c.endpoint, c.units)
		}
	}
}

func TestResolveHostHeader(t *testing.T) {
	tab := mustNew(t, testSpec())
	req, _ := http.NewRequest("GET", "https://10.0.0.1/v1/search", nil)
	req.Host = "api.example.com" // sent to an address, for a host
	if e, err := tab.Resolve(req); err != nil || e.Name != "search" {
		t.Errorf("Resolve = %v, %v; want search", e.Name, err)
	}
}

func TestUnknownEndpoint(t *testing.T) {
	tab := mustNew(t, testSpec())
	for _, u := range []string{
		"https://api.example.com/v2/items?key=SECRET",
		"https://other.example.com/v1/items?key=SECRET",
	} {
		req, _ := http.NewRequest("PUT", u, nil)
		_, err := tab.Resolve(req)
		if !errors.Is(err, ErrUnknownEndpoint) {
			t.Errorf("PUT %s: err = %v, want ErrUnknownEndpoint", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %q reveals the query", err)
		}
	}
	withDefault := testSpec()
	withDefault.Default = &Rule{Endpoint: "other", Charges: []Charge{{"pool", 3}}}
	tab = mustNew(t, withDefault)
	req, _ := http.NewRequest("PUT", "https://api.example.com/v2/items", nil)
	if e, err := tab.Resolve(req); err != nil || e.Name != "other" || e.Units() != 3 {
		t.Errorf("with a default: %v (%d units), %v; want other (3 units)", e.Name, e.Units(), err)
	}
}

func TestInvalidSpecs(t *testing.T) {
	rule := func(pattern string, charges ...Charge) Rule {
		return Rule{Pattern: pattern, Endpoint: "e", Charges: charges}
	}
	cases := []struct {
		name    string
		spec    Spec
		mention string // the error must name the offending rule or bucket
	}{
		{"zero units", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a", Charge{"pool", 0})}}, `rule 0 ("/a")`},
		{"negative units", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a", Charge{"pool", 1}), rule("/b", Charge{"pool", -3})}}, `rule 1 ("/b")`},
		{"overflow", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a", Charge{"pool", 1 << 62})}}, "overflow"},
		{"unknown bucket", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a", Charge{"poool", 1})}}, `"poool"`},
		{"bucket charged twice", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a", Charge{"pool", 1}, Charge{"pool", 2})}}, "twice"},
		{"no charges", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("/a")}}, `rule 0 ("/a")`},
		{"bad pattern", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("GET api.example.com/{bad", Charge{"pool", 1})}}, "{bad"},
		{"empty pattern", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("", Charge{"pool", 1})}}, "empty pattern"},
		{"duplicate pattern", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("GET /a", Charge{"pool", 1}), rule("GET /a", Charge{"pool", 2})}}, `rule 1 ("GET /a"): conflicts with rule 0 ("GET /a")`},
		{"conflicting wildcards", Spec{Buckets: []string{"pool"}, Rules: []Rule{rule("GET /x", Charge{"pool", 1}), rule("GET /a/{id}", Charge{"pool", 1}), rule("GET /a/{name}", Charge{"pool", 2})}}, `rule 2 ("GET /a/{name}"): conflicts with rule 1 ("GET /a/{id}")`},
		{"no endpoint", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Charges: []Charge{{"pool", 1}}}}}, "no endpoint"},
		{"bad default", Spec{Buckets: []string{"pool"}, Default: &Rule{Endpoint: "d", Charges: []Charge{{"x", 1}}}}, "default"},
		{"empty bucket name", Spec{Buckets: []string{""}}, "empty"},
		{"bucket declared twice", Spec{Buckets: []string{"a", "a"}}, "twice"},
		{"free with units", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Free: true, Charges: []Charge{{"pool", 1}}}}}, "free request charges 0 units"},
		{"continuation with units", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Continues: true, Charges: []Charge{{"pool", 3}}}}}, "free request charges 0 units"},
		{"free with a settle", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Free: true, Settle: []Settle{{Bucket: "pool", Field: "cost"}}}}}, "no cost to settle"},
		{"settle of an uncharged bucket", Spec{Buckets: []string{"pool", "tokens"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "tokens", Field: "usage.total_tokens"}}}}}, `"tokens" is not one the rule charges`},
		{"a bucket settled twice", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Field: "a"}, {Bucket: "pool", Header: "X-Cost"}}}}}, "settled twice"},
		{"settle reading nothing", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool"}}}}}, "neither a header nor a field"},
		{"settle from a bad header name", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Header: "X Cost"}}}}}, "not a header name"},
		{"settle on a status that is none", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Status: 999}}}}}, "999 is not an HTTP status"},
		{"settle on a status from a header", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Status: 304, Header: "X-Cost"}}}}}, "a status's cost is its Units"},
		{"settle on a status to negative units", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Status: 304, Units: -1}}}}}, "units must be from 0"},
		{"settle units without a status", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Header: "X-Cost", Units: 2}}}}}, "without a status"},
		{"a status settled twice", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Status: 304}, {Bucket: "pool", Status: 304, Units: 1}}}}}, "settled twice for status 304"},
		{"settle from a bad field path", Spec{Buckets: []string{"pool"}, Rules: []Rule{{Pattern: "/a", Endpoint: "a", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Field: "usage..tokens"}}}}}, "not a dotted path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.spec)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("New = %v, want an error matching ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
			if strings.Contains(err.Error(), ".go:") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q shows source paths or spans lines", err)
			}
		})
	}
}

func TestFuncChargesChecked(t *testing.T) {
	spec := Spec{Buckets: []string{"pool"}, Rules: []Rule{
		{Pattern: "/zero", Endpoint: "zero", Func: func(*http.Request) (Endpoint, error) { return Endpoint{Charges: []Charge{{"pool", 0}}}, nil }},
		{Pattern: "/none", Endpoint: "none", Func: func(*http.Request) (Endpoint, error) { return Endpoint{}, nil }},
		{Pattern: "/nobucket", Endpoint: "nobucket", Func: func(*http.Request) (Endpoint, error) { return Endpoint{Charges: []Charge{{"nope", 1}}}, nil }},
		{Pattern: "/freewithunits", Endpoint: "freewithunits", Func: func(*http.Request) (Endpoint, error) {
			return Endpoint{Free: true, Charges: []Charge{{"pool", 1}}}, nil
		}},
		{Pattern: "/fails", Endpoint: "fails", Func: func(*http.Request) (Endpoint, error) { return Endpoint{}, errors.New("boom") }},
	}}
	tab := mustNew(t, spec)
	for _, p := range []string{"/zero", "/none", "/nobucket", "/freewithunits"} {
		req, _ := http.NewRequest("GET", "https://x"+p, nil)
		if _, err := tab.Resolve(req); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", p, err)
		}
	}
	req, _ := http.NewRequest("GET", "https://x/fails", nil)
	if _, err := tab.Resolve(req); err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "fails") {
		t.Errorf("/fails: err = %v, want the func's error naming the endpoint", err)
	}
}

func TestOverride(t *testing.T) {
	base := testSpec()
	spec, err := base.Override("search", Charge{"pool", 50})
	if err != nil {
		t.Fatal(err)
	}
	tab := mustNew(t, spec)
	for _, u := range []string{"https://api.example.com/v1/search", "https://old.example.com/v1/search"} {
		req, _ := http.NewRequest("GET", u, nil)
		if e, err := tab.Resolve(req); err != nil || e.Units() != 50 {
			t.Errorf("%s after override: %d units (%v), want 50", u, e.Units(), err)
		}
	}
	if base.Rules[2].Charges[0].Units != 100 {
		t.Error("Override changed the spec it was called on")
	}
	if _, err := base.Override("no.such.endpoint", Charge{"pool", 1}); err == nil {
		t.Error("Override of an unknown endpoint succeeded")
	}
}

func TestLoadJSON(t *testing.T) {
	const doc = `{
	  "buckets": ["pool"],
	  "rules": [
	    {"pattern": "GET api.example.com/v1/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 100}]}
	  ],
	  "default": {"endpoint": "other", "charges": [{"bucket": "pool", "units": 1}]}
	}`
	tab, err := Load(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/search", nil)
	if e, err := tab.Resolve(req); err != nil || e.Units() != 100 {
		t.Errorf("search: %d units (%v), want 100", e.Units(), err)
	}
	for name, bad := range map[string]string{
		"misspelt field": `{"buckets":["pool"],"rules":[{"pattern":"/a","endpoint":"a","charges":[{"bucket":"pool","unit":5}]}]}`,
		"not json":       `buckets: pool`,
		"trailing data":  `{"buckets":["pool"]} {}`,
		"string units":   `{"buckets":["pool"],"rules":[{"pattern":"/a","endpoint":"a","charges":[{"bucket":"pool","units":"5"}]}]}`,
	} {
		if _, err := Load(strings.NewReader(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := LoadFile(t.TempDir() + "/missing.json"); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
}

func TestConcurrentResolve(t *testing.T) {
	tab := mustNew(t, testSpec())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				req, _ := http.NewRequest("GET", "https://api.example.com/v1/search", nil)
				if e, err := tab.Resolve(req); err != nil || e.Name != "search" {
					t.Errorf("Resolve = %v, %v", e.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestFreeAndSettledRules: free and continuation rules resolve to free
// endpoints, with the zero-unit charges that name their caps; settle specs
// come through as written, from Go values and from JSON.
func TestFreeAndSettledRules(t *testing.T) {
	tab, err := Load(strings.NewReader(`{
	  "buckets": ["pool", "tokens"],
	  "rules": [
	    {"pattern": "GET /status", "endpoint": "status", "free": true},
	    {"pattern": "PUT /upload/{id}", "endpoint": "upload.chunk", "continues": true, "charges": [{"bucket": "pool", "units": 0}]},
	    {"pattern": "POST /v1/chat", "endpoint": "chat", "charges": [{"bucket": "pool", "units": 1}, {"bucket": "tokens", "units": 4096}],
	     "settle": [{"bucket": "tokens", "field": "usage.total_tokens"}]},
	    {"pattern": "GET /v1/feed", "endpoint": "feed", "charges": [{"bucket": "pool", "units": 1}],
	     "settle": [{"bucket": "pool", "status": 304, "units": 0}]}
	  ]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		want         Endpoint
	}{
		{"GET", "/status", Endpoint{Name: "status", Free: true}},
		{"PUT", "/upload/7", Endpoint{Name: "upload.chunk", Free: true, Continues: true, Charges: []Charge{{"pool", 0}}}},
		{"POST", "/v1/chat", Endpoint{Name: "chat", Charges: []Charge{{"pool", 1}, {"tokens", 4096}}, Settle: []Settle{{Bucket: "tokens", Field: "usage.total_tokens"}}}},
		{"GET", "/v1/feed", Endpoint{Name: "feed", Charges: []Charge{{"pool", 1}}, Settle: []Settle{{Bucket: "pool", Status: 304}}}},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, "https://api.example.com"+c.path, nil)
		got, err := tab.Resolve(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s = %+v, want %+v", c.method, c.path, got, c.want)
		}
		if got.Units() != 0 && got.Free {
			t.Errorf("%s %s: a free endpoint spends %d units", c.method, c.path, got.Units())
		}
	}
}

// TestRefusedPatterns: patterns ServeMux accepts but no cost table means
// are refused when the table is built, each with the whole message a
// user reads; the same patterns written right, or a custom method marked
// as such, load.
func TestRefusedPatterns(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"pattern": "GTE /v1/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 100}]}`,
			`costs: rule 0 ("GTE /v1/search"): method "GTE" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (set custom_method, Rule.CustomMethod, for a method the upstream really uses)`},
		{`{"pattern": "get /v1/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 100}]}`,
			`costs: rule 0 ("get /v1/search"): method "get" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (set custom_method, Rule.CustomMethod, for a method the upstream really uses)`},
		{`{"pattern": "GET v1/items/{id}", "endpoint": "items.get", "charges": [{"bucket": "pool", "units": 1}]}`,
			`costs: rule 0 ("GET v1/items/{id}"): "v1" is not a host name (no dot, no port, not localhost): a path starts with "/", e.g. "/v1/items/{id}"`},
		{`{"pattern": "v1/items", "endpoint": "items.list", "charges": [{"bucket": "pool", "units": 1}]}`,
			`costs: rule 0 ("v1/items"): "v1" is not a host name (no dot, no port, not localhost): a path starts with "/", e.g. "/v1/items"`},
	}
	for _, c := range cases {
		_, err := Load(strings.NewReader(`{"buckets": ["pool"], "rules": [` + c.json + `]}`))
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("Load(%s) = %v\nwant %s", c.json, err, c.want)
		}
	}
	for _, good := range []string{
		`{"pattern": "GET /v1/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 100}]}`,
		`{"pattern": "PROPFIND dav.example.com/files/", "custom_method": true, "endpoint": "files.list", "charges": [{"bucket": "pool", "units": 1}]}`,
		`{"pattern": "GET localhost/v1/items/{id}", "endpoint": "items.get", "charges": [{"bucket": "pool", "units": 1}]}`,
		`{"pattern": "GET 127.0.0.1/v1/items", "endpoint": "items.list", "charges": [{"bucket": "pool", "units": 1}]}`,
		`{"pattern": "DELETE api.example.com/v1/items/{id}", "endpoint": "items.delete", "charges": [{"bucket": "pool", "units": 50}]}`,
	} {
		if _, err := Load(strings.NewReader(`{"buckets": ["pool"], "rules": [` + good + `]}`)); err != nil {
			t.Errorf("Load(%s) = %v, want a table", good, err)
		}
	}
}
