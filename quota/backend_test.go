package quota

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// backend is a Redis the behaviour suite runs on.
type backend struct {
	name   string
	client redis.UniversalClient
	// user, when set, is the client limiters use, logged in as a user
	// with only the rights tollgate needs; client, which the tests use to
	// look at and tamper with what limiters keep, may do anything.
	user redis.UniversalClient
	// real is false for miniredis, whose Lua and number formatting differ
	// from Redis's.
	real bool
}

// flushScripts empties the script cache of every node, as a restart or a
// failover would.
func (b *backend) flushScripts(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch c := b.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.ScriptFlush(ctx).Err()
		})
	default:
		err = c.ScriptFlush(ctx).Err()
	}
	if err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
}

// limiter returns a Limiter on the backend, deciding on the Redis clock
// unless options say otherwise.
func (b *backend) limiter(t testing.TB, opts ...Option) *Limiter {
	t.Helper()
	if b.user != nil {
		return mustNew(t, b.user, opts...)
	}
	return mustNew(t, b.client, opts...)
}

// mustNew returns New's limiter, failing the test on an error.
func mustNew(t testing.TB, c redis.UniversalClient, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The behaviour suite: every test in it runs on miniredis, on a real
// redis-server and on a real 3-master cluster. Each test uses scopes named
// after itself, so tests can share a server.
var suite = []struct {
	name string
	run  func(t *testing.T, b *backend)
}{
	{"WindowBoundaryBurst", testWindowBoundaryBurst},
	{"RetryAfterIsTheInstantTheCostFits", testRetryAfterExact},
	{"RetryAfterOnTheRedisClock", testRetryAfterRedisClock},
	{"CalendarDayResetsAtLocalMidnight", testCalendarDays},
	{"HoldAcrossMidnight", testHoldAcrossMidnight},
	{"ExpensiveWaiterIsServedInItsTurn", testFairnessFIFO},
	{"ExpensiveWaiterUnderLoad", testFairnessUnderLoad},
	{"HoldsKeepArrivalOrderAcrossBuckets", testFIFOAcrossBuckets},
	{"ExactUnderConcurrency", testExactness},
	{"AllLimitsOrNothing", testAllOrNothing},
	{"SliceHoldsItsCalls", testSliceHoldsItsCalls},
	{"ScriptFlush", testScriptFlush},
	{"KeysHaveTTLs", testTTLs},
	{"EntriesSameMicrosecond", testSameMicrosecond},
	{"MetaRebuiltFromLog", testMetaRebuilt},
	{"EvictedLogForgetsItsUnits", testLogEvicted},
	{"CancelGivesUnitsBack", testCancel},
	{"WaitHonoursDeadline", testWaitDeadline},
	{"WaitCancelledGivesUnitsBack", testWaitCancelled},
	{"Pause", testPause},
	{"Record", testRecord},
	{"Lease", testLease},
	{"LeaseGivesBackUnspent", testLeaseGivesBackUnspent},
	{"LeaseRespectsQueueAndDay", testLeaseRespectsQueueAndDay},
	{"ExactWithLeases", testExactWithLeases},
	{"InvalidInputWritesNothing", testInvalidWritesNothing},
	{"HostileNames", testHostileNames},
	{"FastPathAgreesWithGeneral", testFastPathAgrees},
	{"LeanRefusesBucket", testLeanRefusesBucket},
	{"UpgradeFromFormat1", testUpgradeFromFormat1},
	{"UpgradeFromFormat2", testUpgradeFromFormat2},
	{"PauseReachesTheMetas", testPauseReachesTheMetas},
	{"SlicedMatchesUnsliced", testSlicedMatchesUnsliced},
	{"RandomOperationsKeepTheLimit", testRandomOperationsKeepTheLimit},
	{"LaterFormatRefused", testLaterFormatRefused},
	{"Settle", testSettle},
	{"SettleSeveralLimits", testSettleSeveralLimits},
	{"SettleAll", testSettleAll},
	{"SettleFastAgrees", testSettleFastAgrees},
	{"SettleWindowsAgrees", testSettleWindowsAgrees},
	{"SettleWindowsNewExpiry", testSettleWindowsNewExpiry},
	{"ExactWithSettlement", testExactWithSettlement},
	{"SlotsCap", testSlotsCap},
	{"SlotsHandedInOrder", testSlotsHandedInOrder},
	{"SlotsOfADeadProcessExpire", testSlotsOfADeadProcessExpire},
	{"SlotsUnderLoad", testSlotsUnderLoad},
	{"SlotsFreedToTheWaiter", testSlotsFreedToTheWaiter},
	{"CappedOneRoundTripEach", testCappedRoundTrips},
	{"CappedUnitsAndSlotsTogether", testCappedTogether},
	{"CappedWaitersKeepTheirTurn", testCappedWaitersFirst},
	{"CappedDeadHolderExpires", testCappedDeadHolder},
	{"CappedNeverExceeded", testCappedNeverExceeded},
	{"InteractiveBeforeBackground", testInteractiveBeforeBackground},
	{"BackgroundInArrivalOrder", testBackgroundInArrivalOrder},
	{"Announce", testAnnounce},
	{"AnnounceAsOf", testAnnounceAsOf},
	{"AnnounceTolerance", testAnnounceTolerance},
	{"FixedWindow", testFixedWindow},
	{"PaceModel", testPaceModel},
	{"SharesModel", testSharesModel},
	{"PlainRunsLean", testPlainRunsLean},
	{"SharesLend", testSharesLend},
	{"BelowShareFirst", testBelowShareFirst},
	{"TenantInArrivalOrder", testTenantInArrivalOrder},
	{"BackgroundWaitsOnShares", testBackgroundWaitsOnShares},
	{"LeaseFromShare", testLeaseFromShare},
	{"LeaseWithinPace", testLeaseWithinPace},
	{"MuldivExact", testMuldivExact},
	{"PaceBesideTokenBucket", testPaceBesideTokenBucket},
}

func runSuite(t *testing.T, b *backend) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
	}
}

func TestSuiteMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	runSuite(t, &backend{name: "miniredis", client: c})
}

func TestSuiteRedis(t *testing.T) {
	s := redistest.Start(t)
	runSuite(t, &backend{name: "redis", client: s.Client(t), real: true})
}

func TestSuiteCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	runSuite(t, &backend{name: "cluster", client: c.Client(t), real: true})
}

// scope returns a scope name unique to the test.
func scope(t *testing.T, suffix string) string { return t.Name() + "/" + suffix }

// charge builds a one-bucket charge.
func charge(bucket string, cost int64, limits ...Limit) Demand {
	return Demand{Bucket: bucket, Units: cost, Limits: limits}
}

// mustAllow calls Allow and fails the test on error.
func mustAllow(t *testing.T, l *Limiter, scope string, charges ...Demand) *Reservation {
	t.Helper()
	r, err := l.Allow(context.Background(), scope, charges...)
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	return r
}

// mustUsage calls Usage and fails the test on error.
func mustUsage(t *testing.T, l *Limiter, scope, bucket string, limit Limit) Usage {
	t.Helper()
	u, err := l.Usage(context.Background(), scope, bucket, limit)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	return u
}

// mustLoad loads a time zone or fails the test.
func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
