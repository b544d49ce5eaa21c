package github

import (
	"net/http"

	"github.com/tollgate/tollgate/costs"
)

// The pages each rule below follows:
//
//	rest       https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
//	secondary  the same page, "About secondary rate limits" and "Calculating
//	           points for the secondary rate limit" (shared with GraphQL)
//	search     https://docs.github.com/en/rest/search/search#rate-limit
//	ratelimit  https://docs.github.com/en/rest/rate-limit/rate-limit
//	graphql    https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api
//	ghes       https://docs.github.com/en/enterprise-server@latest/rest/quickstart
//	           (the REST API under /api/v3, GraphQL at /api/graphql)
//	etag       https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate:
//	           "Making a conditional request does not count against your
//	           primary rate limit if a 304 response is returned and the
//	           request was made while correctly authorized with an
//	           Authorization header"

// Endpoint names of the table's rules.
const (
	endpointRead     = "rest.read"     // GET, HEAD, OPTIONS
	endpointCreate   = "rest.create"   // POST, and PUT of a file's contents
	endpointWrite    = "rest.write"    // PATCH, PUT, DELETE and other methods
	endpointRender   = "rest.markdown" // POST /markdown, which renders and creates nothing
	endpointSearch   = "search"
	endpointCode     = "search.code"
	endpointRate     = "rate_limit"
	endpointQuery    = "graphql.query"
	endpointMutation = "graphql.mutation"
)

// Table returns the cost table of GitHub's REST and GraphQL APIs. Its
// rules match any host (api.github.com, uploads.github.com, a proxy, a
// simulator), and GitHub Enterprise Server's paths too.
//
// Every request takes one unit of Concurrent, held while it is in flight.
// A REST request spends one unit of its resource (Core; Search or
// CodeSearch for searches; none for GET /rate_limit, which "does not count
// against your primary rate limit") and its secondary points: 1 for GET,
// HEAD and OPTIONS, 5 for POST, PATCH, PUT and DELETE. A GET or HEAD
// answered 304 Not Modified (a conditional request: If-None-Match,
// If-Modified-Since) is settled to nothing in its resource, and keeps its
// secondary points; requests without credentials pay for theirs, as
// GitHub counts them (NewTransport drops the rule for them). GitHub does not
// list which requests create content; the table counts one unit of Content
// for every POST (which creates issues, comments, pull requests, releases,
// repositories...) but POST /markdown, which renders, and for PUT of a
// file's contents, which commits. A GraphQL request (POST /graphql) is
// priced from its body: see the package documentation of GraphQL costs.
//
// The table is data: override a price with costs.Spec.Override, or add
// rules for endpoints GitHub counts against resources of their own, with
// buckets of your own (Options.Buckets).
func Table() costs.Spec {
	read := []costs.Charge{{Bucket: Core, Units: 1}, {Bucket: RESTPoints, Units: 1}, {Bucket: Concurrent, Units: 1}}
	notModified := func(resource string) []costs.Settle { // etag
		return []costs.Settle{{Bucket: resource, Status: http.StatusNotModified, Units: 0}}
	}
	write := []costs.Charge{{Bucket: Core, Units: 1}, {Bucket: RESTPoints, Units: 5}, {Bucket: Concurrent, Units: 1}}
	create := append(write[:len(write):len(write)], costs.Charge{Bucket: Content, Units: 1})
	search := func(resource string) []costs.Charge {
		return []costs.Charge{{Bucket: resource, Units: 1}, {Bucket: RESTPoints, Units: 1}, {Bucket: Concurrent, Units: 1}}
	}
	rate := []costs.Charge{{Bucket: RESTPoints, Units: 1}, {Bucket: Concurrent, Units: 1}}
	spec := costs.Spec{Catalog: true, Buckets: []string{Core, Search, CodeSearch, GraphQL, RESTPoints, GraphQLPoints, Content, Concurrent}}
	add := func(pattern, endpoint string, charges []costs.Charge, settle ...costs.Settle) {
		spec.Rules = append(spec.Rules, costs.Rule{Pattern: pattern, Endpoint: endpoint, Charges: charges, Settle: settle})
	}
	for _, prefix := range []string{"", "/api/v3"} { // api.github.com; GitHub Enterprise Server (ghes)
		add("GET "+prefix+"/", endpointRead, read, notModified(Core)...) // rest, secondary: GET (and HEAD) 1 point
		add("OPTIONS "+prefix+"/", endpointRead, read)                   // secondary: OPTIONS 1 point
		add("POST "+prefix+"/", endpointCreate, create)                  // secondary: POST 5 points
		add("PUT "+prefix+"/repos/{owner}/{repo}/contents/{path...}", endpointCreate, create)
		add("POST "+prefix+"/markdown", endpointRender, write)
		add("POST "+prefix+"/markdown/raw", endpointRender, write)
		add("GET "+prefix+"/search/", endpointSearch, search(Search), notModified(Search)...)           // search: 30 a minute
		add("GET "+prefix+"/search/code", endpointCode, search(CodeSearch), notModified(CodeSearch)...) // search: code, 10 a minute
		add("GET "+prefix+"/rate_limit", endpointRate, rate)                                            // ratelimit: no primary cost
	}
	add("/", endpointWrite, write) // secondary: PATCH, PUT, DELETE 5 points
	for _, path := range []string{"/graphql", "/api/graphql"} {
		spec.Rules = append(spec.Rules, costs.Rule{Pattern: http.MethodPost + " " + path, Endpoint: endpointQuery, Func: graphQLEndpoint})
	}
	return spec
}
