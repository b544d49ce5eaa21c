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
	//go:embed binary.lua
	binaryPart string // a meta's fixed-width fields, packed and unpacked
	//go:embed reach.lua
	reachPart string // reach(): a pause written into the metas it stops
	//go:embed log.lua
	logPart string // the weighted sliding log: load, trim, fit, append, save
	//go:embed now.lua
	nowPart string // the reserve script's clock
	//go:embed fast.lua
	fastPart string // the reserve script's reads and common decision
	//go:embed readpauses.lua
	readPausesPart string // a general decision's read of the pauses
	//go:embed decide.lua
	decidePart string // the general decision, in parts
	//go:embed reserve.lua
	reservePart string
	//go:embed background.lua
	backgroundPart string
	//go:embed record.lua
	recordPart string
	//go:embed cancel.lua
	cancelPart string
	//go:embed settle.lua
	settlePart string
	//go:embed room.lua
	roomPart string // a waiting room in arrival order across processes
	//go:embed slots.lua
	slotsPart string
	//go:embed lease.lua
	leasePart string
	//go:embed usage.lua
	usagePart string
	//go:embed pause.lua
	pausePart string
	//go:embed announce.lua
	announcePart string
	//go:embed control.lua
	controlPart string
	//go:embed inspect.lua
	inspectPart string
	//go:embed series.lua
	seriesPart string

	// Token buckets (quota.TokenBucket): bucket.lua decides one;
	// bucketlog.lua makes every script that takes log.lua take a bucket as
	// one more limit; bucketfast.lua takes the common decision on a bucket
	// alone, before fast.lua.
	//go:embed bucket.lua
	bucketPart string
	//go:embed bucketlog.lua
	bucketLogPart string
	//go:embed bucketfast.lua
	bucketFastPart string
	//go:embed mixedfast.lua
	mixedFastPart string // the common decision on windows and buckets together
	//go:embed settlefast.lua
	settleFastPart string // settle.lua's common case on buckets alone
	//go:embed settlewindows.lua
	settleWindowsPart string // settle.lua's common case on windows alone
	//go:embed bucketusage.lua
	bucketUsagePart string
	//go:embed windowsonly.lua
	windowsOnlyPart string // log.lua's end in a script's lean form

	// Pace and shares (Demand.Pace, Demand.Shares): fair.lua provides
	// the pace line and the tenants' spending; fairread.lua reads the
	// metas, readpauses.lua the pauses, and fairreserve.lua decides;
	// fairundo.lua charges a cancellation or settlement to its tenant.
	// Calls on buckets with neither never run them.
	//go:embed fair.lua
	fairPart string
	//go:embed fairlease.lua
	fairLeasePart string // a lease taken from the tenant's part
	//go:embed fairroom.lua
	fairRoomPart string // the room of the calls that may not hold
	//go:embed fairread.lua
	fairReadPart string
	//go:embed fairreserve.lua
	fairReservePart string
	//go:embed fairundo.lua
	fairUndoPart string
	//go:embed tenants.lua
	tenantsPart string // the tenants' spending and the room, for operators
	//go:embed free.lua
	freePart string
)

// logParts is log.lua with the token buckets in: what every script that
// takes the weighted log takes (binary.lua before it).
var logParts = bucketPart + logPart + bucketLogPart

// lean maps a script that takes the token buckets' code (bucket.lua and
// bucketlog.lua, two dozen Lua functions, each a closure made at every
// call: a quarter of a settlement's instructions) to the same script
// without it, which runScript sends instead when no argument is a
// bucket's span (leanFor).
var lean = map[*redis.Script]*redis.Script{}

// withLean returns the script head + log.lua with the token buckets +
// tail, and records in lean its form without them (windowParts).
func withLean(head, tail string) *redis.Script {
	return pair(head+logParts+tail, head+windowParts+tail)
}

// pair returns the script full, and records in lean the same script as
// windows, its form for calls on windows alone.
func pair(full, windows string) *redis.Script {
	s := newScript(full)
	lean[s] = newScript(windows)
	return s
}

// leanFor returns script's lean form when it has one and no argument is a
// token bucket's span, else script. A bucket's span is a string beginning
// "r" (prepared.go); an argument of another kind that happens to begin so
// keeps the full script, which decides windows the same way.
func leanFor(script *redis.Script, args []any) *redis.Script {
	windows, ok := lean[script]
	if !ok {
		return script
	}
	for _, a := range args {
		if s, ok := a.(string); ok && s != "" && s[0] == 'r' {
			return script
		}
	}
	return windows
}

// windowParts is log.lua without the token buckets, for the lean forms.
var windowParts = logPart + windowsOnlyPart

var (
	// reserveScript decides a call: bucketfast.lua, mixedfast.lua and
	// fast.lua take the common cases (buckets alone, buckets beside
	// windows, windows) before any function of the
	// general code is made (each definition is a closure made at every
	// call, which cost a window's decision a seventh of its
	// instructions); reserve.lua every other.
	reserveScript = pair(binaryPart+nowPart+bucketFastPart+mixedFastPart+fastPart+readPausesPart+logParts+decidePart+reservePart,
		binaryPart+nowPart+fastPart+readPausesPart+windowParts+decidePart+reservePart)
	// backgroundScript decides a background call: now, or a turn in the
	// scope's background room; never a hold.
	backgroundScript = withLean(clockPart+binaryPart, decidePart+roomPart+backgroundPart)
	// recordScript writes units spent without a decision.
	recordScript = withLean(clockPart+binaryPart, recordPart)
	// cancelScript gives a reservation's units back.
	cancelScript = withLean(clockPart+binaryPart, cancelPart)
	// settleScript replaces a reservation's units with their true cost:
	// settlefast.lua takes the settlements on token buckets alone (an LLM
	// call's tokens), and settlewindows.lua those on windows in their open
	// slice, before any function of log.lua is made; settle.lua every
	// other.
	settleScript = pair(clockPart+binaryPart+settleFastPart+settleWindowsPart+logParts+settlePart,
		clockPart+binaryPart+settleWindowsPart+windowParts+settlePart)
	// leaseScript takes and ends leases.
	leaseScript = newScript(clockPart + binaryPart + logParts + leasePart)
	// usageScript reads one limit's usage.
	usageScript = newScript(clockPart + binaryPart + logParts + usagePart)
	// slotsScript takes, releases and renews slots of a concurrency cap.
	slotsScript = newScript(clockPart + roomPart + slotsPart)
	// freeScript frees a slot in a shared pipeline (Slot's free).
	freeScript = newScript(freePart)
	// announceScript records what an upstream announced was spent.
	announceScript = withLean(clockPart+binaryPart, announcePart)
	// pauseScript sets a pause, and writes it into the metas it stops.
	pauseScript = newScript(clockPart + binaryPart + reachPart + pausePart)
	// controlScript pauses for a reason, or resumes, and tells every
	// process listening.
	controlScript = newScript(clockPart + binaryPart + reachPart + controlPart)
	// inspectScript reads what is under way in a bucket: leases, slots,
	// waiters.
	inspectScript = newScript(clockPart + binaryPart + logParts + inspectPart)
	// tenantsScript reads a window's tenants and its bucket's room at
	// one instant (ops.Tenants).
	tenantsScript = newScript(clockPart + tenantsPart)
	// seriesScript reads one limit's usage and the slices counted in its
	// window: usage.lua, wrapped as the function usage(), then series.lua.
	seriesScript = newScript(clockPart + binaryPart + logParts +
		"local function usage()\n" + usagePart + "\nend\n" + seriesPart)
	// fairScript decides a call on buckets with a pace or shares: the
	// general decision, the pace lines and the shares, in one step.
	// The room's code is wrapped as the function rooms_of(), which
	// returns fair_room: made only by the calls that use the room (a
	// definition is a closure made at every call).
	fairScript = newScript(binaryPart + nowPart + fairReadPart + readPausesPart + logParts + decidePart + fairPart +
		"local function rooms_of()\n" + roomPart + fairRoomPart + "\nreturn fair_room\nend\n" + fairReservePart)
	// fairCancelScript and fairSettleScript are cancelScript and
	// settleScript charging their change to the reservation's tenant.
	fairCancelScript = newScript(clockPart + binaryPart + logParts + fairPart +
		"local function body()\n" + cancelPart + "\nend\n" + fairUndoPart)
	fairSettleScript = newScript(clockPart + binaryPart + logParts + fairPart +
		"local function body()\n" + settlePart + "\nend\n" + fairUndoPart)
	// fairLeaseScript is leaseScript on buckets with a pace or shares:
	// a lease taken from, and charged to, its tenant's part.
	fairLeaseScript = newScript(clockPart + binaryPart + logParts + fairPart +
		"local function body()\n" + leasePart + "\nend\n" + fairLeasePart)
	// bucketUsageScript reads one token bucket's level.
	bucketUsageScript = newScript(clockPart + binaryPart + bucketPart + bucketUsagePart)
)
