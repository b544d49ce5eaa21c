//go:build !race

package anthropic_test

// raceDetector reports a build with the race detector (see race_test.go).
const raceDetector = false
