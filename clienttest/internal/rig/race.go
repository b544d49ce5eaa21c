//go:build race

package rig

// Race reports a build with the race detector, which slows every process
// many times over: a request then may take longer from its admission to
// the upstream, and the load tests give it more Transit.
const Race = true
