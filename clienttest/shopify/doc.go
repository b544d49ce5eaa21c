// Package shopify drives tollgate's providers/shopify Transport from
// several processes sharing one shop, one access token and one Redis,
// against the simulated Admin API (internal/shopsim), with GraphQL queries
// as an app sends them (a catalogue page with a fragment and variables, an
// order page, a mutation); and the same load without tollgate, as a
// control. Shopify publishes no Go client: the workers post the queries
// with net/http, as a Go app does. Its tests are all there is to it.
package shopify
