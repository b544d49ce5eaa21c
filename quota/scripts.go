package quota

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Every Lua script the limiter runs, and how each is assembled from parts.
// A part that others build on (clock.lua, log.lua, fast.lua) says in its
// opening comment what it provides; a part that ends a script says what it
// needs from the parts before it.
var (
	//go:embed clock.lua
	clockPart string // clock(): the decision's instant
	//go:embed log.lua
	logPart string // the weighted sliding log: load, trim, fit, append, save
	//go:embed fast.lua
	fastPart string // the reserve script's clock, reads and common decision
	//go:embed reserve.lua
	reservePart string
	//go:embed record.lua
	recordPart string
	//go:embed cancel.lua
	cancelPart string
	//go:embed lease.lua
	leasePart string
	//go:embed usage.lua
	usagePart string
	//go:embed pause.lua
	pausePart string
)

var (
	// reserveScript decides a call: fast.lua takes the common case before
	// the log code is even defined; reserve.lua every other.
	reserveScript = redis.NewScript(fastPart + logPart + reservePart)
	// recordScript writes units spent without a decision.
	recordScript = redis.NewScript(clockPart + logPart + recordPart)
	// cancelScript removes a reservation's entries.
	cancelScript = redis.NewScript(cancelPart)
	// leaseScript takes and ends leases.
	leaseScript = redis.NewScript(clockPart + logPart + leasePart)
	// usageScript reads one limit's usage.
	usageScript = redis.NewScript(clockPart + logPart + usagePart)
	// pauseScript sets a pause; it needs only the clock.
	pauseScript = redis.NewScript(clockPart + pausePart)
)
