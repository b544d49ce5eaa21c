//go:build !race

package rig

// Race reports a build with the race detector (see race.go).
const Race = false
