// Package tollgateotel records OpenTelemetry metrics of a tollgate
// Transport, from its Trace: what it decided for each request, who waits
// and for how long, what each bucket spent, the slots of caps in flight,
// the upstream's pauses, Redis outages, and what is left of each quota.
//
// It is a module of its own, so that tollgate itself never depends on
// OpenTelemetry. Build a Metrics, pass the Transport's Config through
// Instrument (which merges the recording into its Trace, keeping yours),
// build the Transport, and hand it to Observe for the gauges of what is
// left:
//
//	metrics, err := tollgateotel.New(tollgateotel.WithMeterProvider(mp))
//	tr, err := tollgate.New(metrics.Instrument(cfg))
//	metrics.Observe(tr)
//	defer metrics.Close()
//
// For a provider's Transport, instrument the Config it takes, e.g.
// youtube.Options.Tollgate, and observe what it returns.
//
// # Metrics
//
// Names follow OpenTelemetry's rate-limiting conventions for ASP.NET Core
// (aspnetcore.rate_limiting.*) where they apply, in base units:
//
//	tollgate.rate_limiting.requests                  counter {request}: each request's decision, by tollgate.endpoint and tollgate.rate_limiting.result
//	tollgate.rate_limiting.request.time_in_queue     histogram s: each wait for a turn, when it ends, by tollgate.endpoint and tollgate.rate_limiting.result
//	tollgate.rate_limiting.queued_requests           updowncounter {request}: requests waiting for their turn, by tollgate.endpoint
//	tollgate.rate_limiting.active_request_leases     updowncounter {request}: requests holding a slot of a cap on requests in flight (Bucket.MaxInFlight), by tollgate.bucket
//	tollgate.rate_limiting.units.charged             counter {unit}: units admitted requests spend, by tollgate.endpoint and tollgate.bucket
//	tollgate.rate_limiting.units.refunded            counter {unit}: units a settled cost gave back (true cost below the estimate), by tollgate.endpoint and tollgate.bucket
//	tollgate.rate_limiting.settlements               counter {request}: responses that told a true cost, by tollgate.endpoint and tollgate.rate_limiting.result (settled, estimate_kept)
//	tollgate.upstream.pauses                         counter {pause}: pauses the upstream asked for, by tollgate.pause.reason and tollgate.bucket (absent for a whole scope)
//	tollgate.redis.available                         gauge {state}: 1 while decisions go to Redis, 0 while the outage modes decide
//	tollgate.redis.switches                          counter {switch}: switches between Redis and the outage modes, by tollgate.redis.state (up, down)
//	tollgate.quota.remaining                         gauge {unit}: units left of each limit, by tollgate.bucket and tollgate.window
//	tollgate.quota.limit                             gauge {unit}: each limit as the Transport enforces it, by tollgate.bucket and tollgate.window
//	tollgate.window.crossings                        counter {crossing}: thresholds of a window's limit crossed (tollgate.Config.Thresholds), by tollgate.bucket, tollgate.window and tollgate.window.threshold
//	tollgate.window.burning                          up-down counter {window}: windows whose burn-rate alert is on (tollgate.Trace.Burning), by tollgate.bucket and tollgate.window
//
// A request's result is one of admitted (Redis reserved its units),
// leased (spent from this process's lease), local (the FailLocal mode's
// limiter admitted it while Redis was down), unmetered (sent undecided
// while Redis was down, FailOpen), free (a free request), refused (no room,
// or the upstream paused it), cached (refused in this process, from a
// refusal it remembers), cancelled (the caller gave up), unavailable
// (Redis was down and the endpoint fails closed), or error. The units
// charged less the units refunded are what the requests spent.
//
// Attributes stay few: endpoint and bucket names come from the cost table
// and pause reasons from a fixed list. Scopes appear (as tollgate.scope)
// only with WithScopes: a Transport scoped by credential has one per key,
// named by a hash. Without it the quota gauges give, per bucket and
// window, the scope with the fewest units left. A request whose context
// names its caller (tollgate.WithCaller, as tollgate serve does for each
// of its callers) adds tollgate.caller to its requests, units charged,
// waits and settlements.
//
// The quota gauges read Redis through the Transport's Usage once per
// collection for each scope and bucket this process has decided for (the
// first 1,000), never on a request's path.
package tollgateotel
