// Package youtube meters calls to the YouTube Data API v3 with tollgate.
//
// Begin with [NewTransport](keys, rdb, nil): an http.RoundTripper for the
// http.Client of Google's client library or your own; a nil rdb runs an
// in-process Redis, for a single process, and nil options the defaults.
// The package's Example runs it against a local server, and go run
// ./examples/ingest runs eight regions on one quota against a simulated
// API. The other providers are providers/github, providers/openai,
// providers/gemini and providers/anthropic; for any other upstream,
// tollgate.New takes a cost table and limits of your own. To send the
// requests to another host (a proxy, an emulator, a local test server),
// give its host to the table: Options.Table: Granular("127.0.0.1:8080").
//
// The quota belongs to the Google Cloud project, not to the API key: a
// project has 10,000 units a day whatever number of keys it holds, and the
// day resets at midnight Pacific time. More quota comes from Google's
// compliance audit, never from more keys. Every request costs at least one
// unit, invalid ones included, and each page of results is a new request.
//
// [NewTransport] gives a ready http.RoundTripper from your keys and a Redis
// client: the cost table ([Classic] or, by default, [Granular]), with a
// price for every method of the API, the daily limits less a 5% reserve,
// the project as the scope, and a reader of YouTube's quota errors
// ([Upstream]) so that one 403 quotaExceeded stops every worker until the
// next Pacific midnight. An upload is charged once, however many chunks carry its file,
// and a channel's upload limit (400 uploadLimitExceeded) pauses the uploads
// of the credential that met it, not the project's.
package youtube

import (
	"time"
	_ "time/tzdata" // the Pacific day must be known on bare machines
)

// DefaultHosts are the hosts the cost tables match when given none: the
// current API host and the older one.
var DefaultHosts = []string{"youtube.googleapis.com", "www.googleapis.com"}

// Bucket names.
const (
	// Pool is the project's daily quota, 10,000 units by default.
	Pool = "pool"
	// Search is search.list's own bucket in the granular model: 100 calls a day.
	Search = "search"
	// Upload is videos.insert's own bucket in the granular model: 100 calls a day.
	Upload = "upload"
	// BatchGetStats is videos.batchGetStats's own bucket, in both models:
	// 10,000 calls a day.
	BatchGetStats = "batchGetStats"
)

// Default daily quotas.
const (
	DefaultQuota           = 10000 // pool units a day
	DefaultSearchQuota     = 100   // search.list calls a day (granular)
	DefaultUploadQuota     = 100   // videos.insert calls a day (granular)
	DefaultBatchStatsQuota = 10000 // videos.batchGetStats calls a day
	DefaultReservePercent  = 5     // kept below every quota
)

// pacific is where YouTube's day ends.
var pacific = mustLoad("America/Los_Angeles")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("youtube: " + err.Error())
	}
	return loc
}

// Pacific returns America/Los_Angeles, whose midnight resets the quota.
func Pacific() *time.Location { return pacific }

// NextReset returns the first Pacific midnight after t: when a spent quota
// comes back. A day there lasts 23 or 25 hours when daylight saving time
// begins or ends.
func NextReset(t time.Time) time.Time {
	y, m, d := t.In(pacific).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, pacific)
}
