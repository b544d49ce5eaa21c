// Package provider holds what tollgate's provider packages (youtube,
// github, openai, anthropic, gemini) share beyond the root package.
package provider

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate"
)

// Owned is what a provider's NewTransport sets itself in the
// tollgate.Config its Options carry, and where the user sets it instead.
type Owned struct {
	Provider string // the package name, which starts every error
	Upstream string // the upstream's name, e.g. "GitHub"
	Buckets  string // the options that set limits, e.g. "Options.Buckets"
	// Scope says how the provider scopes requests, when it does so
	// itself; empty when Options.Tollgate.Scope is the user's to set.
	Scope string
	// Sizes, when not nil, are checked too (see Sizes.Check).
	Sizes *Sizes
}

// Check returns an error naming the first setting of cfg that the
// provider sets itself, or the first of Sizes that cannot work, or nil.
func (o Owned) Check(cfg tollgate.Config) error {
	var msg string
	switch {
	case cfg.Base != nil:
		msg = "set Options.Base, not Options.Tollgate.Base"
	case cfg.Limiter != nil:
		msg = "Options.Tollgate.Limiter is set: NewTransport builds the limiter on the Redis client it is given"
	case cfg.Costs != nil:
		msg = "set the cost table in Options.Table, not Options.Tollgate.Costs"
	case cfg.Buckets != nil:
		msg = "set bucket limits in " + o.Buckets + ", not Options.Tollgate.Buckets"
	case cfg.Scope != nil && o.Scope != "":
		msg = "Options.Tollgate.Scope is set: " + o.Scope
	case cfg.ReadResponse != nil:
		msg = "Options.Tollgate.ReadResponse is set: NewTransport reads " + o.Upstream + "'s responses itself"
	case o.Sizes != nil:
		return o.Sizes.Check(o.Provider)
	default:
		return nil
	}
	return fmt.Errorf("%s: %s", o.Provider, msg)
}

// Sizes are the options of the providers that read request bodies and may
// run on a scaled clock (openai, gemini), checked alike.
type Sizes struct {
	Minute         time.Duration // Options.Minute: 0 for real minutes
	MaxBody        int64         // Options.MaxBody: 0 for the default
	ReservePercent float64       // Options.ReservePercent: 0 for the default
}

// Check returns an error naming the first of the sizes that cannot work,
// prefixed with the provider's name, or nil.
func (s Sizes) Check(provider string) error {
	switch {
	case s.Minute < 0:
		return fmt.Errorf("%s: Options.Minute is %v; it must not be negative", provider, s.Minute)
	case s.MaxBody < 0:
		return fmt.Errorf("%s: Options.MaxBody is %d; it must not be negative", provider, s.MaxBody)
	case s.ReservePercent >= 100 || s.ReservePercent != s.ReservePercent:
		return fmt.Errorf("%s: Options.ReservePercent is %v; it must be under 100", provider, s.ReservePercent)
	}
	return nil
}

// Length returns how long a minute lasts: Minute, or time.Minute for 0.
func (s Sizes) Length() time.Duration {
	if s.Minute == 0 {
		return time.Minute
	}
	return s.Minute
}

// Body returns the most bytes of a request body read to count it:
// MaxBody, or def for 0.
func (s Sizes) Body(def int64) int64 {
	if s.MaxBody == 0 {
		return def
	}
	return s.MaxBody
}

// Reserve returns the percent kept below every limit: ReservePercent,
// def for 0, none for a negative one.
func (s Sizes) Reserve(def float64) float64 {
	switch {
	case s.ReservePercent == 0:
		return def
	case s.ReservePercent < 0:
		return 0
	}
	return s.ReservePercent
}
