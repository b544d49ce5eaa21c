// Package github drives go-github (github.com/google/go-github/v75, a
// REST client whose raw request API also carries GraphQL queries) through
// tollgate's providers/github Transport against the simulated API
// (internal/ghsim), in several processes sharing one Redis, and checks
// that GitHub never refuses a request for a limit, that no more than 100
// requests are ever in flight, and that the binding limit is used. Its
// tests are all there is to it.
//
// The scaled runs take seconds (a minute lasts a second, an hour six);
// one run in real time, three minutes long, is kept for when it is asked
// for:
//
//	TOLLGATE_GITHUB_REALTIME=1 go test -run TestManyProcesses/realtime -timeout 10m ./github
package github
