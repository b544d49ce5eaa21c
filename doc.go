// Package tollgate keeps outbound API calls inside the upstream's quota.
//
// Begin with [New]: it builds a [Transport], an [http.RoundTripper] for an
// [http.Client], from a [Config] that names a limiter (quota.New on a Redis
// client; package quota/embedded runs one in-process), a cost table
// (package costs) and the limits of each bucket the table charges. The
// package's Example is a whole program against a local server. For a known
// upstream, a provider's NewTransport does all of it in one call:
// providers/youtube (YouTube Data API v3), providers/github (GitHub REST and
// GraphQL), providers/openai (OpenAI and servers that speak its protocol),
// providers/gemini (Google's Gemini API), providers/anthropic (Anthropic's
// Messages API).
//
// For each request a Transport looks up its unit cost in the cost table,
// names the quota pool the request spends from (its scope), and asks the
// limiter in Redis for the units, keeping a reserve below the upstream's
// real quota. Then, as the endpoint's [Policy] says, it sends the request,
// waits its turn, fails with a [*QuotaError] (errors.Is(err,
// [ErrQuotaExhausted])), or fails over to another route; while Redis is
// down, it fails closed, open, or on a local share of the limits. Every
// process and region that shares the Redis shares the quota. When the
// upstream itself reports its quota spent, every worker holds off until it
// resets.
//
// [New] checks the whole configuration and reports, as an error matching
// [ErrConfig], whatever would make a request fail for want of it: a bucket
// charged without limits, a reserve that leaves nothing, a rule charging
// more than a limit admits, a policy that needs routes or a local limiter.
// A request that is not sent returns an error: a [*QuotaError] (no room,
// or the upstream said its quota is spent), an [*UnavailableError] (Redis
// down, failing closed), costs.ErrUnknownEndpoint, or the context's.
//
// The README and the pages of docs/ in the repository say more: the
// providers, several processes and what their Redis needs, policies and
// outages, settlement, caps and priorities, announced quotas, operating,
// metrics, failure modes, performance, the Redis format and upgrading.
// For maintainers, docs/design.md follows a request through the code,
// file by file.
package tollgate
