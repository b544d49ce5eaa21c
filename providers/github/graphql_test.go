package github

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// body is a GraphQL request body of query, with variables and an
// operation name when given.
func body(query string, extra ...string) []byte {
	m := map[string]any{"query": query}
	if len(extra) > 0 && extra[0] != "" {
		m["variables"] = json.RawMessage(extra[0])
	}
	if len(extra) > 1 {
		m["operationName"] = extra[1]
	}
	b, _ := json.Marshal(m)
	return b
}

// The example of GitHub's page, "Predicting the point value of a query":
// 5,101 requests, which the page rounds to 51 points and the estimate
// rounds up to 52.
const docExample = `query { viewer { login repositories(first: 100) { edges { node { id
  issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } } }`

func TestQueryCost(t *testing.T) {
	for _, c := range []struct {
		name     string
		body     []byte
		points   int64
		mutation bool
	}{
		{"no connection", body(`{ viewer { login } }`), 1, false},
		{"the page's example", body(docExample), 52, false},
		// The node-limit page's examples: 50 repositories with 10 issues
		// each need 1 + 50 requests; with pull requests, issues and their
		// comments, and followers: 1 + 50 + 1,000 + 50 + 1,000 + 1.
		{"node limit, simple", body(`{ viewer { repositories(first: 50) { edges { repository: node { name issues(first: 10) { totalCount } } } } } }`), 1, false},
		{"node limit, complex", body(`{ viewer {
			repositories(first: 50) { edges { repository: node { name
				pullRequests(first: 20) { edges { pullRequest: node { title comments(first: 10) { edges { comment: node { bodyHTML } } } } } }
				issues(first: 20) { totalCount edges { issue: node { title bodyHTML comments(first: 10) { edges { comment: node { bodyHTML } } } } } } } } }
			followers(first: 10) { edges { follower: node { login } } } } }`), 22, false},
		{"variables given", body(`query($n: Int!) { viewer { repositories(first: $n) { nodes { issues(first: $n) { nodes { id } } } } } }`, `{"n": 100}`), 2, false},
		{"a variable's default", body(`query($n: Int = 100) { viewer { repositories(first: $n) { nodes { issues(first: 100) { nodes { id } } } } } }`), 2, false},
		{"a variable sent as null takes its default", body(`query($n: Int = 10) { viewer { repositories(first: $n) { nodes { issues(first: 100) { nodes { id } } } } } }`, `{"n": null}`), 1, false},
		{"a variable not sent is 100", body(`query($n: Int) { viewer { repositories(last: $n) { nodes { issues(first: 100) { nodes { id } } } } } }`), 2, false},
		{"a variable that is no integer is 100", body(`query($n: Int) { viewer { repositories(first: $n) { nodes { issues(first: 100) { nodes { id } } } } } }`, `{"n": "ten"}`), 2, false},
		{"sizes beyond 1-100 are their bound", body(`{ a(first: 1000) { b(first: -5) { c(first: 100) { id } } } }`), 3, false},
		{"first and last: the larger", body(`{ a(first: 10, last: 100) { b(first: 100) { id } } }`), 2, false},
		{"fragments, spread twice", body(`{ a(first: 100) { ...F } b(first: 100) { ...F } } fragment F on T { c(first: 100) { id } }`), 3, false},
		{"an inline fragment", body(`{ a(first: 100) { ... on T { c(first: 100) { id } } } }`), 2, false},
		{"a mutation", body(`mutation { createIssue(input: {repositoryId: "R", title: "t"}) { issue { id } } }`), 1, true},
		{"the operation named", body(`query Small { viewer { login } } query Big { a(first: 100) { b(first: 100) { id } } }`, "", "Small"), 1, false},
		{"several, none named: the dearest", body(`query Small { viewer { login } } mutation Big { a(first: 100) { b(first: 100) { id } } }`), 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			points, mutation, err := queryCost(c.body)
			if err != nil {
				t.Fatal(err)
			}
			if points != c.points || mutation != c.mutation {
				t.Errorf("queryCost = %d points, mutation %v; want %d, %v", points, mutation, c.points, c.mutation)
			}
		})
	}
}

func TestQueryCostRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte(`query { viewer { login } }`), "not a JSON request"},
		{"no query", []byte(`{"variables": {}}`), "no query"},
		{"a query that is not a string", []byte(`{"query": 12}`), "not a JSON request"},
		{"not GraphQL", body(`{ viewer { login }`), "syntax error"},
		{"an operation it lacks", body(`query A { a }`, "", "B"), `no operation named "B"`},
		{"an undefined fragment", body(`{ a { ...F } }`), `fragment "F", which it does not define`},
		{"a fragment that spreads itself", body(`{ a { ...F } } fragment F on T { b { ...G } } fragment G on T { ...F }`), "spreads itself"},
		{"too deep through fragments", body(deepFragments(40)), "deeper than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := queryCost(c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("queryCost = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// deepFragments is a query whose n fragments each spread the next from 20
// levels down.
func deepFragments(n int) string {
	var b strings.Builder
	b.WriteString("{ ...F0 }")
	for i := range n {
		b.WriteString(" fragment F" + strconv.Itoa(i) + " on T { " + strings.Repeat("a { ", 20))
		if i+1 < n {
			b.WriteString("...F" + strconv.Itoa(i+1))
		} else {
			b.WriteString("id")
		}
		b.WriteString(strings.Repeat(" }", 20) + " }")
	}
	return b.String()
}

func TestGraphQLEndpoint(t *testing.T) {
	req, _ := http.NewRequest("POST", "https://api.github.com/graphql", strings.NewReader(string(body(docExample))))
	e, err := graphQLEndpoint(req)
	if err != nil {
		t.Fatal(err)
	}
	want := "graphql.query [{graphql 52} {graphql_points 1} {concurrent 1}] settle [{graphql  data.rateLimit.cost 0 0}]"
	if got := fmt.Sprint(e.Name, " ", e.Charges, " settle ", e.Settle); got != want {
		t.Errorf("endpoint %s, want %s", got, want)
	}
	// The body is still the request's.
	rest, _ := io.ReadAll(req.Body)
	if string(rest) != string(body(docExample)) {
		t.Errorf("the request's body was read away")
	}

	req, _ = http.NewRequest("POST", "https://api.github.com/graphql", strings.NewReader(string(body(`mutation { addStar(input: {starrableId: "R"}) { clientMutationId } }`))))
	e, err = graphQLEndpoint(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(e.Name, " ", e.Charges), "graphql.mutation [{graphql 1} {graphql_points 5} {concurrent 1} {content 1}]"; got != want {
		t.Errorf("endpoint %s, want %s", got, want)
	}

	req, _ = http.NewRequest("POST", "https://api.github.com/graphql", io.NopCloser(strings.NewReader(string(body(docExample)))))
	if _, err := graphQLEndpoint(req); err != errNoBody {
		t.Errorf("a body that cannot be read twice: %v, want errNoBody", err)
	}
	req, _ = http.NewRequest("POST", "https://api.github.com/graphql", strings.NewReader(`{"query":"`+strings.Repeat(" ", maxGraphQLBody)+`{ a }"}`))
	if _, err := graphQLEndpoint(req); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a body over %d bytes: %v, want an error", maxGraphQLBody, err)
	}
}
