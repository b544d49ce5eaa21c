package github

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/costs"
)

func TestTable(t *testing.T) {
	table, err := costs.New(Table())
	if err != nil {
		t.Fatal(err)
	}
	const (
		read   = "[{core 1} {rest_points 1} {concurrent 1}]"
		write  = "[{core 1} {rest_points 5} {concurrent 1}]"
		create = "[{core 1} {rest_points 5} {concurrent 1} {content 1}]"
	)
	for _, c := range []struct{ method, url, endpoint, charges string }{
		{"GET", "https://api.github.com/repos/o/r", "rest.read", read},
		{"HEAD", "https://api.github.com/repos/o/r", "rest.read", read},
		{"OPTIONS", "https://api.github.com/repos/o/r", "rest.read", read},
		{"GET", "https://api.github.com/repos/o/r/issues?page=2", "rest.read", read},
		{"POST", "https://api.github.com/repos/o/r/issues", "rest.create", create},
		{"POST", "https://uploads.github.com/repos/o/r/releases/1/assets?name=a.zip", "rest.create", create},
		{"PUT", "https://api.github.com/repos/o/r/contents/docs/a.md", "rest.create", create},
		{"PUT", "https://api.github.com/user/starred/o/r", "rest.write", write},
		{"PATCH", "https://api.github.com/repos/o/r/issues/1", "rest.write", write},
		{"DELETE", "https://api.github.com/repos/o/r/issues/1/lock", "rest.write", write},
		{"POST", "https://api.github.com/markdown", "rest.markdown", write},
		{"GET", "https://api.github.com/search/issues?q=bug", "search", "[{search 1} {rest_points 1} {concurrent 1}]"},
		{"GET", "https://api.github.com/search/code?q=tollgate", "search.code", "[{code_search 1} {rest_points 1} {concurrent 1}]"},
		{"GET", "https://api.github.com/rate_limit", "rate_limit", "[{rest_points 1} {concurrent 1}]"},
		{"GET", "https://ghe.example.com/api/v3/search/code?q=x", "search.code", "[{code_search 1} {rest_points 1} {concurrent 1}]"},
		{"POST", "https://ghe.example.com/api/v3/repos/o/r/issues", "rest.create", create},
		{"POST", "http://127.0.0.1:8080/graphql", "graphql.query", "[{graphql 1} {graphql_points 1} {concurrent 1}]"},
		{"POST", "https://ghe.example.com/api/graphql", "graphql.query", "[{graphql 1} {graphql_points 1} {concurrent 1}]"},
	} {
		var b io.Reader
		if strings.HasSuffix(c.url, "graphql") {
			b = strings.NewReader(`{"query": "{ viewer { login } }"}`)
		}
		req, _ := http.NewRequest(c.method, c.url, b)
		e, err := table.Resolve(req)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.url, err)
			continue
		}
		if got := fmt.Sprint(e.Charges); e.Name != c.endpoint || got != c.charges {
			t.Errorf("%s %s: %s %s, want %s %s", c.method, c.url, e.Name, got, c.endpoint, c.charges)
		}
	}
}

// A price is data: one Override away.
func TestTableOverride(t *testing.T) {
	spec, err := Table().Override("search.code", costs.Charge{Bucket: CodeSearch, Units: 1}, costs.Charge{Bucket: RESTPoints, Units: 3}, costs.Charge{Bucket: Concurrent, Units: 1})
	if err != nil {
		t.Fatal(err)
	}
	table, err := costs.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://api.github.com/search/code?q=x", nil)
	e, err := table.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.Charges); got != "[{code_search 1} {rest_points 3} {concurrent 1}]" {
		t.Errorf("overridden charges %s", got)
	}
}

// An override that stops charging core stops settling it: a table that
// charges reads secondary points only still compiles.
func TestTableOverrideDropsTheSettleOfCore(t *testing.T) {
	spec, err := Table().Override(endpointRead, costs.Charge{Bucket: RESTPoints, Units: 1}, costs.Charge{Bucket: Concurrent, Units: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := costs.New(spec); err != nil {
		t.Errorf("the overridden table: %v", err)
	}
}
