//go:build !race

package gemini_test

// raceDetector reports a build with the race detector (see race_test.go).
const raceDetector = false
