// Package anthropic drives Anthropic's Go SDK
// (github.com/anthropics/anthropic-sdk-go, v1.84.0) through tollgate's
// providers/anthropic Transport against the simulated Messages API
// (internal/anthsim): messages of every size, JSON and streamed, some
// with a cached system prompt, the SDK's own retries left on, from many
// goroutines in several processes sharing one key and one Redis; and the
// same load without tollgate, as a control. Its tests are all there is
// to it.
//
// The load test scales a minute down to four seconds; to run it on the
// real clock (a minute is a minute, some four minutes in all):
//
//	cd clienttest && TOLLGATE_ANTHROPIC_REALTIME=1 go test ./anthropic -run TestManyProcesses -v
package anthropic
