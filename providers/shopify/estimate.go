package shopify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/internal/graphql"
)

// GraphQL costs. Shopify calculates a query's cost before running it
// (GraphQL Admin API rate limits, "Cost calculation",
// https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits):
// "Every field in the schema has an integer cost value"; by default
// scalars and enums 0 points, objects 1, interfaces and unions the most of
// their possible selections, connections 2 plus the objects they return
// (the page size, first or last, times what one of their nodes costs),
// mutations 10; a query may request at most 1,000 points
// (https://shopify.dev/docs/api/usage/limits). It takes the requested cost
// from the bucket before the query runs and refunds the difference to the
// actual cost after. Some mutations cost more than 10 (productSet,
// productCreate and productUpdate are priced by the work they do since
// 2025-10: https://shopify.dev/changelog/dynamic-complexity-cost-for-productset-mutation):
// the estimate cannot know it, and the reconciliation with throttleStatus
// after each answer is what holds the fleet to Shopify's count then.
//
// The estimate must never be below Shopify's requested cost, or the fleet
// would ask for more than the bucket holds, nor far above it, or the fleet
// would wait for points it does not spend. Without the schema it reads
// the query's shape: a field with a selection set is an object, one with a
// first or last argument a connection, whose edges wrap its nodes (node,
// nodes: an object each, the page size of them) and whose pageInfo counts
// as an object once; every fragment and inline fragment is counted as
// selected (the dearest type of an interface costs no more than all of
// them), every field a directive may skip as selected, and a top-level
// mutation field as 10 plus what it selects. A page size it cannot know (a variable neither given nor
// defaulted, a value that is no integer) is taken as 250, the largest
// Shopify allows; a larger one is taken as 250 too (Shopify refuses it).
// The response's extensions.cost.actualQueryCost then settles the charge.

// Query cost bounds.
const (
	// maxQueryCost is the most points one query may request
	// (https://shopify.dev/docs/api/usage/limits): a larger estimate is
	// charged at it, since Shopify refuses a query that requests more.
	maxQueryCost = 1000
	// maxPage is the largest first or last Shopify allows.
	maxPage = 250
	// mutationCost is a mutation field's cost.
	mutationCost = 10
	// maxSteps bounds the selections one estimate walks, fragments counted
	// each time they are spread: a short document cannot cost exponential
	// work.
	maxSteps = 100_000
	// saturate bounds counts far above any limit, so they never overflow.
	saturate = 1 << 40
)

// errNotGraphQL is the error of a GraphQL request body that is not one.
var errNotGraphQL = errors.New("shopify: the GraphQL request's body is not a GraphQL request")

// graphQLRequest is the body of a GraphQL request.
type graphQLRequest struct {
	Query         string                     `json:"query"`
	Variables     map[string]json.RawMessage `json:"variables"`
	OperationName string                     `json:"operationName"`
}

// estimate returns the points a GraphQL request body will request, never
// below what Shopify calculates by default for a query it accepts, and at most
// maxQueryCost; it fails for a body that is not a GraphQL request, a query
// that does not parse, an operation it lacks, or a document whose
// fragments spread one another in a cycle or past 100,000 selections.
func estimate(body []byte) (int64, error) {
	var r graphQLRequest
	if err := json.Unmarshal(body, &r); err != nil || r.Query == "" {
		return 0, errNotGraphQL
	}
	doc, err := graphql.Parse(r.Query)
	if err != nil {
		return 0, fmt.Errorf("shopify: the GraphQL query: %w", err)
	}
	var ops []*graphql.Operation
	for _, op := range doc.Operations {
		if r.OperationName == "" || op.Name == r.OperationName {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return 0, fmt.Errorf("shopify: the GraphQL query has no operation named %q", r.OperationName)
	}
	var points int64
	for _, op := range ops { // several without a name, which Shopify refuses: the dearest
		e := &estimator{doc: doc, op: op, vars: r.Variables}
		c, err := e.cost(op.Selections, op.Type == "mutation", false, 0)
		if err != nil {
			return 0, err
		}
		points = max(points, c)
	}
	return min(max(points, 1), maxQueryCost), nil
}

// estimator prices one operation.
type estimator struct {
	doc   *graphql.Document
	op    *graphql.Operation
	vars  map[string]json.RawMessage
	steps int
}

// cost returns the estimate of a selection set; top marks a mutation's
// top level, page a connection's own selection set, whose cost is that of
// one of its nodes.
func (e *estimator) cost(sels []graphql.Selection, top, page bool, depth int) (int64, error) {
	if depth > 4*graphql.MaxDepth {
		return 0, errors.New("shopify: the GraphQL query's fragments nest too deep (a cycle?)")
	}
	if e.steps += len(sels); e.steps > maxSteps {
		return 0, fmt.Errorf("shopify: the GraphQL query selects more than %d fields, its fragments spread", maxSteps)
	}
	var sum int64
	for _, s := range sels {
		var c int64
		var err error
		switch {
		case s.Spread != "":
			f := e.doc.Fragments[s.Spread]
			if f == nil {
				return 0, fmt.Errorf("shopify: the GraphQL query spreads fragment %q, which it does not define", s.Spread)
			}
			c, err = e.cost(f.Selections, top, page, depth+1)
		case s.Inline:
			c, err = e.cost(s.Selections, top, page, depth+1)
		case s.Selections == nil && !top:
			c = 0 // a scalar or an enum
		case top:
			c, err = e.cost(s.Selections, false, false, depth+1)
			c = min(c+1+mutationCost, saturate)
		default:
			if n, ok := e.page(s.Arguments); ok {
				c, err = e.connection(s.Selections, n, depth+1)
				break
			}
			switch {
			case page && s.Name == "edges":
				c, err = e.cost(s.Selections, false, true, depth+1)
			default:
				c, err = e.cost(s.Selections, false, false, depth+1)
				c = min(c+1, saturate) // the object
			}
		}
		if err != nil {
			return 0, err
		}
		sum = min(sum+c, saturate)
	}
	return sum, nil
}

// connection returns the estimate of a connection of n nodes: 2, and its
// pageInfo (an object) once, and n times the rest.
func (e *estimator) connection(sels []graphql.Selection, n int64, depth int) (int64, error) {
	var nodes []graphql.Selection
	info := int64(0)
	for _, s := range sels {
		if s.Name == "pageInfo" && s.Spread == "" && !s.Inline {
			c, err := e.cost(s.Selections, false, false, depth+1)
			if err != nil {
				return 0, err
			}
			info = min(info+c+1, saturate)
			continue
		}
		nodes = append(nodes, s)
	}
	c, err := e.cost(nodes, false, true, depth)
	return min(2+info+n*c, saturate), err
}

// page returns a field's page size (the larger of first and last) and
// whether it has one: maxPage where it cannot be known.
func (e *estimator) page(args map[string]graphql.Value) (int64, bool) {
	var size int64
	found := false
	for _, name := range []string{"first", "last"} {
		if v, ok := args[name]; ok {
			size, found = max(size, e.intOf(v)), true
		}
	}
	return size, found
}

// intOf returns the page size a value gives, between 1 and maxPage;
// maxPage when it gives none.
func (e *estimator) intOf(v graphql.Value) int64 {
	if v.Kind == graphql.Variable {
		if raw, ok := e.vars[v.Text]; ok && string(raw) != "null" {
			var n json.Number
			if err := json.Unmarshal(raw, &n); err != nil {
				return maxPage
			}
			return clampPage(string(n))
		}
		d, ok := e.op.Defaults[v.Text]
		if !ok {
			return maxPage
		}
		v = d
	}
	if v.Kind != graphql.Int {
		return maxPage
	}
	return clampPage(v.Text)
}

// clampPage reads an integer page size, kept to 1..maxPage; maxPage when
// it is no integer.
func clampPage(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return maxPage
	}
	return min(max(n, 1), maxPage)
}
