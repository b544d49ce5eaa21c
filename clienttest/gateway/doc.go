// Package gateway drives tollgate's gateway (`tollgate serve`) with
// clients in other languages, beside a Go process on the library: a PHP
// cron job (php-cli, php-curl) fetching YouTube's most popular videos of
// eight regions, and a Node service on OpenAI's official `openai` npm
// package, both through the gateway with their caller tokens, while a Go
// process spends the same YouTube quota through providers/youtube's
// Transport on the same Redis. The upstreams are the project's
// simulators. Its tests are all there is to it; the workers' scripts are
// in testdata/.
//
// The test needs php (with curl), node, and the `openai` package
// installed in a directory named by TOLLGATE_OPENAI_NODE; without them it
// is skipped, unless TOLLGATE_REQUIRE_POLYGLOT is set (as .ci/run sets
// it), which makes their absence a failure. To run it:
//
//	dir=$(mktemp -d) && npm install --prefix "$dir" openai@6
//	cd clienttest && TOLLGATE_OPENAI_NODE="$dir" TOLLGATE_REQUIRE_POLYGLOT=1 go test ./gateway -v
//
// The test builds cmd/tollgate itself, in a subprocess that go test's
// cache cannot see: after a change to the command or the library, run it
// with -count=1.
package gateway
