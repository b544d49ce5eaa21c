package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/graphql"
)

// GraphQL costs. GitHub prices a query before running it
// (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api,
// "Predicting the point value of a query"):
//
//  1. "Add up the number of requests needed to fulfill each unique
//     connection in the call. Assume every request will reach the first
//     or last argument limits."
//  2. "Divide the number by 100 and round the result to the nearest whole
//     number to get the final aggregate point value."
//  3. "The minimum point value of a call to the GraphQL API is 1."
//
// A connection is a field with a first or last argument; it needs one
// request for every node of the connections around it (the page sizes
// above it multiplied), and its own page size multiplies the requests of
// the connections inside it. The page's worked example, repositories
// (first: 100) holding issues (first: 50) holding labels (first: 60),
// needs 1 + 100 + 5,000 = 5,101 requests: 51 points.
//
// The estimate rounds up rather than to the nearest whole number, so that
// it is never below what GitHub counts; when the query asks for rateLimit
// { cost }, the response settles it to GitHub's figure, and otherwise the
// X-RateLimit-Used that every GraphQL response announces holds the bucket
// to GitHub's count. Where the estimator cannot know a page size (a
// variable the request does not give and whose definition has no
// default, a value that is not an integer) it takes 100, the most a page
// may hold ("Values of first and last must be within 1-100"); sizes out of
// that range are taken as its nearest bound. Directives (@include, @skip)
// are not evaluated: the selections they guard are counted.
//
// A query costs 1 point of GraphQLPoints and a mutation 5 ("Calculating
// points for the secondary rate limit"); a mutation also counts as
// content-creating.

// maxGraphQLBody bounds the body of a GraphQL request that is priced (and
// buffered, when it cannot be read twice). A larger one fails: it is
// beyond any query GitHub serves.
const maxGraphQLBody = 1 << 20

// Page sizes GitHub allows on a connection.
const (
	minPage = 1
	maxPage = 100
)

// maxNesting bounds how deep the pricer goes, through selection sets and
// the fragments they spread: a deeper query is refused rather than priced
// on an ever larger stack.
const maxNesting = 4 * graphql.MaxDepth

// maxRequests caps the request count of a query, far beyond any limit:
// counts saturate there instead of overflowing.
const maxRequests = 1 << 50

// errNoBody is the error of a GraphQL request whose body cannot be read
// without taking it from the caller (no GetBody).
var errNoBody = errors.New("github: the GraphQL request's body cannot be read twice (no GetBody); send it through github.Transport, which buffers it")

// graphQLEndpoint is the Func of the GraphQL rule: it prices the request
// from its body.
func graphQLEndpoint(req *http.Request) (costs.Endpoint, error) {
	body, err := requestBody(req)
	if err != nil {
		return costs.Endpoint{}, err
	}
	points, mutation, err := queryCost(body)
	if err != nil {
		return costs.Endpoint{}, err
	}
	e := costs.Endpoint{
		Name:    endpointQuery,
		Charges: []costs.Charge{{Bucket: GraphQL, Units: points}, {Bucket: GraphQLPoints, Units: 1}, {Bucket: Concurrent, Units: 1}},
		Settle:  []costs.Settle{{Bucket: GraphQL, Field: "data.rateLimit.cost"}},
	}
	if mutation {
		e.Name = endpointMutation
		e.Charges[1].Units = 5
		e.Charges = append(e.Charges, costs.Charge{Bucket: Content, Units: 1})
	}
	return e, nil
}

// requestBody reads a copy of the request's body, leaving the body itself
// to the request.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody == nil {
		return nil, errNoBody
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("github: reading the GraphQL request's body: %w", err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, maxGraphQLBody+1))
	if err != nil {
		return nil, fmt.Errorf("github: reading the GraphQL request's body: %w", err)
	}
	if len(body) > maxGraphQLBody {
		return nil, fmt.Errorf("github: the GraphQL request's body is over %d bytes", maxGraphQLBody)
	}
	return body, nil
}

// graphQLRequest is the body of a GraphQL request.
type graphQLRequest struct {
	Query         string                     `json:"query"`
	Variables     map[string]json.RawMessage `json:"variables"`
	OperationName string                     `json:"operationName"`
}

// queryCost estimates the primary points of a GraphQL request body, and
// reports whether it is a mutation. A body that is not such JSON, a query
// that is not GraphQL, or an operation name the query lacks is an error:
// GitHub would refuse the request too. A document of several operations
// and no operation name (which GitHub refuses) is priced as its dearest.
func queryCost(body []byte) (points int64, mutation bool, err error) {
	var r graphQLRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, false, fmt.Errorf("github: the GraphQL request's body is not a JSON request: %w", err)
	}
	if r.Query == "" {
		return 0, false, errors.New("github: the GraphQL request has no query")
	}
	doc, err := graphql.Parse(r.Query)
	if err != nil {
		return 0, false, fmt.Errorf("github: %w", err)
	}
	found := false
	for _, op := range doc.Operations {
		if r.OperationName != "" && op.Name != r.OperationName {
			continue
		}
		found = true
		p := pricer{doc: doc, op: op, vars: r.Variables, memo: map[string]int64{}, visiting: map[string]bool{}}
		requests, err := p.requests(op.Selections)
		if err != nil {
			return 0, false, err
		}
		if pts := pointsOf(requests); pts > points {
			points = pts
		}
		mutation = mutation || op.Type == "mutation"
	}
	if !found {
		return 0, false, fmt.Errorf("github: the GraphQL query has no operation named %q", r.OperationName)
	}
	return points, mutation, nil
}

// pointsOf turns a request count into points: divided by 100, rounded up,
// at least 1.
func pointsOf(requests int64) int64 {
	return max((requests+99)/100, 1)
}

// pricer counts the requests one operation needs.
type pricer struct {
	doc      *graphql.Document
	op       *graphql.Operation
	vars     map[string]json.RawMessage
	memo     map[string]int64 // a fragment's requests, counted once
	visiting map[string]bool  // the fragments being counted, to stop at cycles
	depth    int
}

// requests returns the requests a selection set needs when its
// surroundings need one: the sum over its connections.
func (p *pricer) requests(sels []graphql.Selection) (int64, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxNesting {
		return 0, fmt.Errorf("github: the GraphQL query nests selections and fragments deeper than %d levels", maxNesting)
	}
	var total int64
	for _, s := range sels {
		var n int64
		var err error
		switch {
		case s.Spread != "":
			n, err = p.fragment(s.Spread)
		case s.Inline:
			n, err = p.requests(s.Selections)
		default:
			n, err = p.requests(s.Selections)
			if page, ok := p.pageSize(s.Arguments); ok {
				n = addSat(1, mulSat(page, n)) // itself, then its page's worth of each inner request
			}
		}
		if err != nil {
			return 0, err
		}
		total = addSat(total, n)
	}
	return total, nil
}

// fragment returns the requests of a named fragment's selections.
func (p *pricer) fragment(name string) (int64, error) {
	if n, ok := p.memo[name]; ok {
		return n, nil
	}
	f := p.doc.Fragments[name]
	if f == nil {
		return 0, fmt.Errorf("github: the GraphQL query spreads fragment %q, which it does not define", name)
	}
	if p.visiting[name] {
		return 0, fmt.Errorf("github: the GraphQL query's fragment %q spreads itself", name)
	}
	p.visiting[name] = true
	n, err := p.requests(f.Selections)
	delete(p.visiting, name)
	if err == nil {
		p.memo[name] = n
	}
	return n, err
}

// pageSize returns the page size of a field's first or last argument
// (the larger, when both are given), and whether it has one: whether the
// field is a connection.
func (p *pricer) pageSize(args map[string]graphql.Value) (int64, bool) {
	var size int64
	found := false
	for _, name := range []string{"first", "last"} {
		v, ok := args[name]
		if !ok {
			continue
		}
		found = true
		size = max(size, p.intValue(v))
	}
	return size, found
}

// intValue returns a page size a value gives, within 1-100; maxPage when
// it gives none that can be read.
func (p *pricer) intValue(v graphql.Value) int64 {
	switch v.Kind {
	case graphql.Int:
		return clampPage(v.Text)
	case graphql.Variable:
		if raw, ok := p.vars[v.Text]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			var n json.Number
			if json.Unmarshal(raw, &n) == nil {
				return clampPage(n.String())
			}
			return maxPage
		}
		if d, ok := p.op.Defaults[v.Text]; ok && d.Kind == graphql.Int {
			return clampPage(d.Text)
		}
	}
	return maxPage
}

// clampPage reads an integer as a page size within 1-100: maxPage when
// it is not an integer.
func clampPage(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && len(s) > 0 && s[0] == '-':
		return minPage // a negative integer too long for int64
	case err != nil:
		return maxPage
	}
	return min(max(n, minPage), maxPage)
}

// addSat and mulSat add and multiply non-negative counts, saturating at
// maxRequests.
func addSat(a, b int64) int64 { return min(a+b, maxRequests) }

func mulSat(a, b int64) int64 {
	if a != 0 && b > maxRequests/a {
		return maxRequests
	}
	return min(a*b, maxRequests)
}
