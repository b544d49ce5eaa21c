//go:build race

package anthropic_test

// raceDetector reports a build with the race detector, which slows every
// process many times over: a request then may take longer from its
// admission to the upstream, and the load test gives it more Transit.
const raceDetector = true
