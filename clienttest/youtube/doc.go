// Package youtube drives Google's Go client for the YouTube Data API v3
// (google.golang.org/api/youtube/v3, v0.309.0) through tollgate's
// providers/youtube Transport against the simulated API (internal/ytsim),
// and checks that every call, upload and error is charged and read exactly
// as the simulated upstream charges and answers it. Its tests are all
// there is to it.
package youtube
