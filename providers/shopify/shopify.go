// Package shopify meters calls to Shopify's Admin API, GraphQL and REST,
// against the buckets Shopify keeps per app and store, shared by every
// process that spends them through one Redis.
//
// Build a Transport with NewTransport and give it to the http.Client your
// code (or Shopify's client) sends with. Its scope is the shop (the
// request's *.myshopify.com host, or Options.Shop) and the app (a hash of
// the X-Shopify-Access-Token header); raw tokens never reach Redis, logs
// or errors.
//
// GraphQL Admin API: a query is charged, before it is sent, the points it
// will request (estimated from the query, never below what Shopify
// calculates by default for a query it runs), and settled to the
// actualQueryCost of its answer, as Shopify takes the requested cost and
// gives back the difference
// (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits).
// The bucket (Points) is a token bucket held to each answer's
// extensions.cost.throttleStatus.currentlyAvailable: when Shopify leaves
// less room than tollgate counts, the difference is recorded as spent. A
// THROTTLED answer (HTTP 200) pauses the bucket for every worker until the
// points asked for have restored, and comes back as a
// *tollgate.QuotaError.
//
// REST Admin API: each request is charged one request of Requests, a
// token bucket held to X-Shopify-Shop-Api-Call-Limit likewise; a 429
// pauses it for its Retry-After, decimal or not
// (https://shopify.dev/docs/api/usage/limits).
//
// Until an answer tells a scope's buckets, the smallest Shopify has
// documented are assumed (1,000 points restored at 50 a second, 40
// requests leaking 2 a second) unless Options.Points and Options.Requests
// say otherwise: so a fleet's first seconds are never throttled. Then the
// sizes the answers tell (maximumAvailable and restoreRate; the call
// limit's size) are enforced.
//
// Refusals match errors.Is(err, tollgate.ErrQuotaExhausted).
package shopify
