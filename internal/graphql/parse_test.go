package graphql

import (
	"errors"
	"strings"
	"testing"
)

// The query of GitHub's page on rate limits, "Predicting the point value
// of a query", verbatim.
const githubExample = `query {
  viewer {
    login
    repositories(first: 100) {
      edges {
        node {
          id

          issues(first: 50) {
            edges {
              node {
                id

                labels(first: 60) {
                  edges {
                    node {
                      id
                      name
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}`

// find returns the field named name in sels, searching depth first.
func find(sels []Selection, name string) *Selection {
	for i := range sels {
		if sels[i].Name == name {
			return &sels[i]
		}
		if s := find(sels[i].Selections, name); s != nil {
			return s
		}
	}
	return nil
}

func TestParseGitHubExample(t *testing.T) {
	doc, err := Parse(githubExample)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Operations) != 1 || doc.Operations[0].Type != "query" || doc.Operations[0].Name != "" {
		t.Fatalf("operations %+v, want one anonymous query", doc.Operations)
	}
	for name, first := range map[string]string{"repositories": "100", "issues": "50", "labels": "60"} {
		s := find(doc.Operations[0].Selections, name)
		if s == nil {
			t.Fatalf("no field %q", name)
		}
		if got := s.Arguments["first"]; got.Kind != Int || got.Text != first {
			t.Errorf("%s(first:) = %+v, want Int %s", name, got, first)
		}
	}
}

func TestParseEverySyntax(t *testing.T) {
	src := "\uFEFF# a comment\n" + `query Issues($owner: String!, $n: Int = 25, $labels: [String!] = ["bug"]) @live {
  repo: repository(owner: $owner, name: "tollgate\u00e9\"") {
    issues(first: $n, states: [OPEN, CLOSED], orderBy: {field: CREATED_AT, direction: DESC}, after: null) {
      nodes { ...IssueFields @include(if: true) }
      ... on IssueConnection { totalCount }
      ... @skip(if: false) { pageInfo { hasNextPage } }
    }
  }
}
mutation Make { createIssue(input: {title: """a "block" \""" string""", n: -1.5e3}) { issue { id } } }
fragment IssueFields on Issue { title labels(last: 10) { nodes { name } } }`
	doc, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Operations) != 2 || doc.Operations[0].Name != "Issues" || doc.Operations[1].Type != "mutation" {
		t.Fatalf("operations %+v", doc.Operations)
	}
	q := doc.Operations[0]
	if d := q.Defaults["n"]; d.Kind != Int || d.Text != "25" {
		t.Errorf("default of $n = %+v, want Int 25", d)
	}
	if _, ok := q.Defaults["owner"]; ok {
		t.Errorf("$owner has no default, got one")
	}
	repo := q.Selections[0]
	if repo.Alias != "repo" || repo.Name != "repository" || repo.Arguments["name"].Text != "tollgateé\"" {
		t.Errorf("aliased field %+v", repo)
	}
	issues := repo.Selections[0]
	if v := issues.Arguments["first"]; v.Kind != Variable || v.Text != "n" {
		t.Errorf("issues(first:) = %+v, want the variable n", v)
	}
	kinds := map[string]ValueKind{"states": List, "orderBy": Object, "after": Null}
	for arg, kind := range kinds {
		if got := issues.Arguments[arg].Kind; got != kind {
			t.Errorf("argument %s is of kind %d, want %d", arg, got, kind)
		}
	}
	if sels := issues.Selections; len(sels) != 3 || sels[0].Selections[0].Spread != "IssueFields" || !sels[1].Inline || !sels[2].Inline {
		t.Errorf("spread and inline fragments: %+v", sels)
	}
	if f := doc.Fragments["IssueFields"]; f == nil || find(f.Selections, "labels").Arguments["last"].Text != "10" {
		t.Errorf("fragment %+v", doc.Fragments["IssueFields"])
	}
}

func TestParseRefuses(t *testing.T) {
	deep := strings.Repeat("{ a ", MaxDepth+1) + strings.Repeat("}", MaxDepth+1)
	for _, src := range []string{
		"",
		"   # only a comment",
		"{ }",
		"{ a",
		"{ a(first: 01) }",
		"{ a(first: 1.) }",
		"{ a(first: 1x) }",
		`{ a(s: "unterminated) }`,
		"{ a(s: \"two\nlines\") }",
		`{ a(s: "\q") }`,
		`{ a(s: "\u12") }`,
		`{ a(s: """never closed) }`,
		"{ a . b }",
		"{ a ~ }",
		"type Query { a: Int }",
		"query Q { a } query Q { b }",
		"{ a } query Q { b }",
		"fragment F on T { a } fragment F on T { b } { a }",
		"fragment on on T { a } { a }",
		"query ($v: Int = $w) { a }",
		"query ($v: [[[Int) { a }",
		deep,
		strings.Repeat("[", MaxDepth+1),
		"{ a(l: " + strings.Repeat("[", MaxDepth+1) + ") }",
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%.40q) = %v, want a *SyntaxError", src, err)
		}
	}
	if _, err := Parse(strings.Repeat("{ a ", MaxDepth-1) + strings.Repeat("}", MaxDepth-1)); err != nil {
		t.Errorf("a document %d levels deep: %v", MaxDepth-1, err)
	}
}
