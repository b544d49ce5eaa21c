// Package clienttest holds tests that drive tollgate with the upstreams'
// own client libraries (clienttest/youtube: Google's
// google.golang.org/api/youtube/v3). It is a module of its own, like
// bench/, so that those clients never become dependencies of tollgate.
//
//	cd clienttest && go test -race ./...
package clienttest
