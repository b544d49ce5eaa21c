// Package gemini drives Google's Gen AI SDK for Go (google.golang.org/genai,
// v1.77.0) through tollgate's providers/gemini Transport against the
// simulated Gemini API (internal/gemsim): generateContent, streamed and
// not, and batches of embeddings, from many goroutines in several
// processes sharing one key and one Redis, with the SDK's default (no
// retries) and with its HTTPOptions.RetryOptions set; and the same load
// without tollgate, which the API refuses. Its tests are all there is to
// it.
//
// The load tests scale a minute down to two seconds (a day to 1,440 of
// them); to run them on the real clock (some ten minutes in all):
//
//	cd clienttest && TOLLGATE_GEMINI_REALTIME=1 go test ./gemini -run TestManyProcesses -v
package gemini
