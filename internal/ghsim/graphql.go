package ghsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/graphql"
)

// GraphQL as GitHub prices and limits it
// (https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api):
// "Add up the number of requests needed to fulfill each unique connection
// in the call. Assume every request will reach the first or last argument
// limits. Divide the number by 100 and round the result to the nearest
// whole number [...] The minimum point value of a call to the GraphQL API
// is 1." And, under "Node limit": "Clients must supply a first or last
// argument on any connection. Values of first and last must be within
// 1-100. Individual calls cannot request more than 500,000 total nodes."
// A connection, here, is a field with a first or last argument.

const (
	maxNodes     = 500000
	maxQueryBody = 1 << 20
	// maxCount caps counts, which saturate there: far beyond maxNodes.
	maxCount = 1 << 40
)

// queryError is an error GitHub's GraphQL answer lists.
type queryError struct {
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

func (e *queryError) Error() string { return e.Message }

// graphQLBody is a GraphQL request's body.
type graphQLBody struct {
	Query         string                     `json:"query"`
	Variables     map[string]json.RawMessage `json:"variables"`
	OperationName string                     `json:"operationName"`
}

// serveGraphQL meters, prices and answers a GraphQL request.
func (s *Server) serveGraphQL(w http.ResponseWriter, r *http.Request, token string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxQueryBody+1))
	var in graphQLBody
	if err != nil || len(raw) > maxQueryBody || json.Unmarshal(raw, &in) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"})
		return
	}
	if token == "" {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "This endpoint requires you to be authenticated.", "documentation_url": "https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql"})
		return
	}
	op, cost, nodes, qerr := price(in)
	req := request{resource: GraphQL, units: cost, points: 1, graphQL: true}
	if op != nil && op.Type == "mutation" {
		req.points, req.content = 5, true
	}
	u, head, ok := s.enter(w, r, token, req)
	defer s.leave(u)
	if !ok {
		return
	}
	for k, v := range head {
		w.Header()[k] = v
	}
	if qerr != nil {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []*queryError{qerr}})
		return
	}
	data := map[string]any{}
	for _, sel := range op.Selections {
		key := sel.Name
		if sel.Alias != "" {
			key = sel.Alias
		}
		switch sel.Name {
		case "rateLimit":
			data[key] = rateLimitObject(sel.Selections, head, cost, nodes)
		case "viewer":
			data[key] = map[string]any{"login": u.login, "id": strconv.Itoa(u.id)}
		default:
			data[key] = nil
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// rateLimitObject answers the rateLimit field's selections from the
// window's headers.
func rateLimitObject(sels []graphql.Selection, head http.Header, cost, nodes int64) map[string]any {
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(head.Get(k), 10, 64)
		return n
	}
	out := map[string]any{}
	for _, f := range sels {
		key := f.Name
		if f.Alias != "" {
			key = f.Alias
		}
		switch f.Name {
		case "cost":
			out[key] = cost
		case "limit":
			out[key] = num("X-RateLimit-Limit")
		case "remaining":
			out[key] = num("X-RateLimit-Remaining")
		case "used":
			out[key] = num("X-RateLimit-Used")
		case "resetAt":
			out[key] = time.Unix(num("X-RateLimit-Reset"), 0).UTC().Format(time.RFC3339)
		case "nodeCount":
			out[key] = nodes
		}
	}
	return out
}

// price finds the request's operation and its cost in points and nodes.
// A query GitHub would not run comes back with its error: it costs
// nothing.
func price(in graphQLBody) (*graphql.Operation, int64, int64, *queryError) {
	doc, err := graphql.Parse(in.Query)
	if err != nil {
		return nil, 0, 0, &queryError{Message: "Parse error: " + err.Error()}
	}
	var op *graphql.Operation
	for _, o := range doc.Operations {
		if in.OperationName == "" && len(doc.Operations) == 1 || o.Name == in.OperationName {
			op = o
		}
	}
	if op == nil {
		return nil, 0, 0, &queryError{Message: "An operation name is required, and must name an operation of the document"}
	}
	p := pricing{doc: doc, op: op, vars: in.Variables, requests: map[string]int64{}, nodes: map[string]int64{}, visiting: map[string]bool{}}
	requests, nodes, qerr := p.walk(op.Selections, 0)
	if qerr != nil {
		return op, 0, 0, qerr
	}
	if nodes > maxNodes {
		return op, 0, 0, &queryError{Type: "MAX_NODE_LIMIT_EXCEEDED", Message: fmt.Sprintf("This query requests up to %d possible nodes which exceeds the maximum limit of %d.", nodes, maxNodes)}
	}
	return op, max((requests+50)/100, 1), nodes, nil
}

// pricing counts what one operation needs.
type pricing struct {
	doc             *graphql.Document
	op              *graphql.Operation
	vars            map[string]json.RawMessage
	requests, nodes map[string]int64 // per fragment, counted once
	visiting        map[string]bool
}

// walk returns the requests and nodes a selection set needs when its
// surroundings need one request, one node.
func (p *pricing) walk(sels []graphql.Selection, depth int) (requests, nodes int64, qerr *queryError) {
	if depth > 4*graphql.MaxDepth {
		return 0, 0, &queryError{Message: "The query is nested too deeply."}
	}
	for _, s := range sels {
		var r, n int64
		switch {
		case s.Spread != "":
			r, n, qerr = p.fragment(s.Spread, depth)
		case s.Inline:
			r, n, qerr = p.walk(s.Selections, depth+1)
		default:
			r, n, qerr = p.walk(s.Selections, depth+1)
			if qerr == nil {
				var page int64
				var conn bool
				page, conn, qerr = p.page(s)
				if conn {
					r, n = capped(1+page*r), capped(page+page*n)
				}
			}
		}
		if qerr != nil {
			return 0, 0, qerr
		}
		requests, nodes = capped(requests+r), capped(nodes+n)
	}
	return requests, nodes, nil
}

// fragment counts a named fragment once.
func (p *pricing) fragment(name string, depth int) (int64, int64, *queryError) {
	if r, ok := p.requests[name]; ok {
		return r, p.nodes[name], nil
	}
	f := p.doc.Fragments[name]
	if f == nil || p.visiting[name] {
		return 0, 0, &queryError{Message: fmt.Sprintf("Fragment %s is undefined or spreads itself.", name)}
	}
	p.visiting[name] = true
	r, n, qerr := p.walk(f.Selections, depth+1)
	delete(p.visiting, name)
	if qerr == nil {
		p.requests[name], p.nodes[name] = r, n
	}
	return r, n, qerr
}

// page returns a field's page size, from its first or last argument, and
// whether it is a connection; a size that is not within 1-100 is an error.
func (p *pricing) page(s graphql.Selection) (int64, bool, *queryError) {
	var size int64
	conn := false
	for _, arg := range []string{"first", "last"} {
		v, ok := s.Arguments[arg]
		if !ok {
			continue
		}
		conn = true
		text, given := v.Text, v.Kind == graphql.Int
		if v.Kind == graphql.Variable {
			if raw, ok := p.vars[v.Text]; ok {
				text, given = string(raw), true
			} else if d, ok := p.op.Defaults[v.Text]; ok && d.Kind == graphql.Int {
				text, given = d.Text, true
			}
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if !given || err != nil {
			return 0, true, &queryError{Type: "MISSING_PAGINATION_BOUNDARIES", Message: fmt.Sprintf("You must provide a `first` or `last` value to properly paginate the `%s` connection.", s.Name)}
		}
		if n < 1 || n > 100 {
			return 0, true, &queryError{Type: "EXCESSIVE_PAGINATION", Message: fmt.Sprintf("Requesting %d records on the `%s` connection exceeds the `%s` limit of 100 records.", n, s.Name, arg)}
		}
		size = max(size, n)
	}
	return size, conn, nil
}

func capped(n int64) int64 { return min(n, maxCount) }
