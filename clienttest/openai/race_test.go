//go:build race

package openai_test

// raceDetector reports a build with the race detector, which
// slows every process many times over: on a shared two-core machine a
// request then may take more than 250ms from its admission to the
// upstream, and the load test gives it 500ms.
const raceDetector = true
