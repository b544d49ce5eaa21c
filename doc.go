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
// providers/gemini (Google's Gemini API).
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
// # The path of a request
//
// [New] (transport.go) checks the Config (config.go, bucket.go), computes
// the limits it enforces (limits.go: the one place for the reserve, the
// background and local shares, and Transit) and declares the path as
// ordered lists of stages (path.go). [Transport.RoundTrip] (transport.go)
// runs it, carrying the request in one value (request.go), in this order:
//
//  1. Entry (transport.go): the endpoint and its charges from the cost
//     table (package costs), the scope (scope.go), the policy and priority
//     (policy.go, checked as New checks them, config.go); the request's
//     instant is read once, here, and passed down.
//  2. Before Redis (path.go): a free request during a pause this process
//     knows of is refused, and one that charges no capped bucket is let
//     through (remembered.go, internal/remember); a request whose lease is
//     in hand spends from it (lease.go, internal/lease).
//  3. Whether to ask Redis (outage.go, internal/outage): always while it
//     answers; while it does not, one request in a while probes it.
//  4. On Redis (path.go): a lease renewed (lease.go); under Refuse, a
//     refusal this process remembers (remembered.go); then the decision
//     (decide.go), as the policy says: at once, on the next route
//     (Failover, route.go), after a hold (WaitTurn, wait.go), or sent
//     anyway and reported, unless paused (Shadow, shadow.go). In each
//     scope it asks, the request takes its gates (gates.go): the gate of a
//     bucket still learning its limit (internal/learn), a slot of each
//     capped bucket (internal/caps), then its units, under the limits
//     limits.go computes (bucket.go's reserve); a refusal becomes a
//     *QuotaError (errors.go) in one place (request.go) and is remembered
//     (internal/remember). A pause or a changed limit that reaches a
//     waiting request gives back what it holds and decides it again
//     (pauses.go, internal/notices). The buckets decided on are described
//     for the operators' tools (describe.go).
//  5. When Redis fails, or while it is down: the endpoint's outage mode
//     (outage.go): nothing sent, sent unmetered, or decided on the local
//     limiter (decide.go again); what was spent is recorded in Redis when
//     it answers again (internal/outage).
//  6. The decision is told to the Trace and the log (hooks.go, the one
//     place that builds a Decision).
//  7. Handoff and send (send.go): a request that reaches the base
//     transport later than Transit after its admission is decided again
//     (back to 2); one that provably never reached the upstream gets its
//     units back.
//  8. The readers of the response, in order: the quotas it announces
//     (announced.go, internal/learn), then whether the upstream says its
//     quota is spent (response.go, upstream.go), then its true cost,
//     settled as its body is read (settle.go, internal/meter).
//
// What a request holds (gates, slots, units) is given back in reverse
// order by one function (gates.go: release), whatever path it took: gates
// once the response's headers are read, slots once its body ends,
// everything when it is not sent. Off the path, the pauses and resumes
// other processes tell are heard while anything needs them (notices.go,
// internal/notices), what this process spends, what of it waits and what
// is refused is written for tollgate status every few seconds, never
// while idle (spending.go, internal/spend: the path only counts in
// memory), and [Transport.Usage], [Transport.Record] and
// [Transport.Pause] read and correct the count (usage.go).
//
// The README and the pages of docs/ in the repository say more: the
// providers, several processes, policies and outages, settlement, caps and
// priorities, announced quotas, operating, metrics, failure modes,
// performance, the Redis format and upgrading. docs/design.md follows a
// request through the code, file by file.
package tollgate
