// Package shopify drives tollgate's providers/shopify Transport from
// several processes sharing one shop, one access token and one Redis,
// against the simulated Admin API (internal/shopsim), with GraphQL queries
// as an app sends them (a catalogue page with a fragment and variables, an
// order page, a mutation); and the same load without tollgate, as a
// control. Shopify publishes no Go client: the workers post the queries
// with net/http, as a Go app does. TestNodeThroughGateway adds a Node
// service on Shopify's official @shopify/admin-api-client sending through
// `tollgate serve`, the package installed in a directory named by
// TOLLGATE_SHOPIFY_NODE (without it the test is skipped, unless
// TOLLGATE_REQUIRE_POLYGLOT is set):
//
//	dir=$(mktemp -d) && npm install --prefix "$dir" @shopify/admin-api-client@1
//	cd clienttest && TOLLGATE_SHOPIFY_NODE="$dir" go test ./shopify -run TestNodeThroughGateway -v
//
// Its tests are all there is to it.
package shopify
