// Package openai drives OpenAI's Go client (github.com/openai/openai-go/v3,
// v3.96.0) through tollgate's providers/openai Transport against the
// simulated API (internal/oaisim): chat completions of every size,
// streamed and not, responses, embeddings, and the errors, from many
// goroutines in several processes sharing one Redis. Its tests are all
// there is to it.
//
// The load test scales a minute down to four seconds; to run it on the
// real clock (a minute is a minute, some three minutes in all):
//
//	cd clienttest && TOLLGATE_OPENAI_REALTIME=1 go test ./openai -run TestManyProcesses -v
package openai
