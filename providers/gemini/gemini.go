// Package gemini meters calls to Google's Gemini API
// (generativelanguage.googleapis.com) with tollgate.
//
// Begin with [NewTransport](rdb, nil): an http.RoundTripper for the Gen AI
// SDK's HTTPOptions (google.golang.org/genai) or any other client; a nil
// rdb runs an in-process Redis, for a single process, and nil options
// enforce the free tier's limits of the models [FreeTier] knows.
//
// Gemini's limits belong to the Google Cloud project, not to the key, and
// to each model: requests per minute (RPM), input tokens per minute (TPM)
// and requests per day (RPD), "Requests per day (RPD) quotas reset at
// midnight Pacific time" (rate limits,
// https://ai.google.dev/gemini-api/docs/rate-limits). The API announces
// none of them in headers: [Options] gives them, per model. Google does
// not say how a minute is counted; tollgate counts each minute limit over
// any sixty seconds (a sliding window), which never admits more than a
// fixed minute would, and the day as the Pacific calendar day.
//
// Every request spends, in its project and model's scope (see [Scope]),
// one request of the [RPM] and [RPD] buckets (n for a batch of n
// embeddings) and its estimated input tokens of the [TPM] bucket, settled
// to the promptTokenCount the answer tells (see [Counting]). A 429
// RESOURCE_EXHAUSTED names the limit it hit in a google.rpc.QuotaFailure:
// that bucket alone pauses, for every worker, for the google.rpc.RetryInfo
// delay (a day's limit: until the Pacific midnight). See [Upstream].
//
// The other providers are providers/youtube, providers/github and
// providers/openai; for any other upstream, tollgate.New takes a cost
// table and limits of your own.
package gemini

import (
	"maps"
	"time"
	_ "time/tzdata" // the Pacific day must be known on bare machines
)

// Bucket names: every model has the three, in its own scope.
const (
	// RPM counts requests over any minute.
	RPM = "rpm"
	// RPD counts requests over the Pacific day (or 1,440 of
	// Options.Minute).
	RPD = "rpd"
	// TPM counts input tokens over any minute, as estimated when the
	// request is sent and settled to the answer's promptTokenCount.
	TPM = "tpm"
)

// Defaults.
const (
	// DefaultReservePercent is kept below every limit.
	DefaultReservePercent = 5
	// DefaultMaxBody bounds the request bodies read to count their tokens:
	// a larger body fails with ErrBody before anything is sent.
	DefaultMaxBody = 32 << 20
	// DefaultRatePause is how long a bucket pauses after a 429 that tells
	// no retryDelay.
	DefaultRatePause = 10 * time.Second
)

// Limits are one model's limits in one project, as the project's tier
// gives them (https://ai.google.dev/gemini-api/docs/rate-limits, or the
// project's page in Google AI Studio). A limit of 0 is not enforced; a
// Limits with none set is no limits at all (see Options.Models).
type Limits struct {
	// RPM and TPM are requests and input tokens per minute; RPD requests
	// per day.
	RPM, TPM, RPD int64
}

// zero reports limits with none set.
func (l Limits) zero() bool { return l == Limits{} }

// freeTier are the free tier's limits of some current models, as the rate
// limits page (https://ai.google.dev/gemini-api/docs/rate-limits, "Free
// Tier") listed them in 2025. Google changes them without notice, and
// reports have it lowering some day limits since: the project's own
// limits in Google AI Studio are the truth. They are data, and
// Options.Limits and Options.Models replace them.
var freeTier = map[string]Limits{
	"gemini-2.5-pro":        {RPM: 5, TPM: 250000, RPD: 100},
	"gemini-2.5-flash":      {RPM: 10, TPM: 250000, RPD: 250},
	"gemini-2.5-flash-lite": {RPM: 15, TPM: 250000, RPD: 1000},
	"gemini-2.0-flash":      {RPM: 15, TPM: 1000000, RPD: 200},
	"gemini-2.0-flash-lite": {RPM: 30, TPM: 1000000, RPD: 200},
	"gemini-embedding-001":  {RPM: 100, TPM: 30000, RPD: 1000},
}

// FreeTier returns the free tier's limits of the models it knows, by model
// name: what NewTransport enforces for a model that Options.Models does
// not name when Options.Limits is zero. The map is a copy, to read or to
// change and pass as Options.Models.
func FreeTier() map[string]Limits { return maps.Clone(freeTier) }
