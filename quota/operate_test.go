package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// What operators' tools read and do (describe.go, survey.go, control.go,
// listen.go, inspect.go), on miniredis, a redis-server and a cluster.
var operateSuite = []struct {
	name string
	run  func(t *testing.T, b *backend)
}{
	{"DescriptionRoundTrip", testDescriptionRoundTrip},
	{"SurveyFindsScopesBucketsWindows", testSurvey},
	{"PauseWithReason", testPauseWithReason},
	{"PauseSaysWhose", testPauseSaysWhose},
	{"ResumeLiftsEveryPauseOfAScope", testResume},
	{"NoticesReachListeners", testNotices},
	{"Activity", testActivity},
}

func TestOperateMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	runOperate(t, &backend{name: "miniredis", client: c})
}

func TestOperateRedis(t *testing.T) {
	s := redistest.Start(t)
	runOperate(t, &backend{name: "redis", client: s.Client(t), real: true})
}

func TestOperateCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	runOperate(t, &backend{name: "cluster", client: c.Client(t), real: true})
}

func runOperate(t *testing.T, b *backend) {
	for _, tc := range operateSuite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
	}
}

// opPrefix gives each test its own prefix, so that surveys see only its keys.
func opPrefix(t *testing.T) Option {
	return WithPrefix("op:" + strings.ReplaceAll(t.Name(), "/", ".") + ":")
}

func testDescriptionRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t, opPrefix(t))
	la := mustLoad(t, "America/Los_Angeles")
	want := Description{
		Scope: "project-a", Bucket: "pool",
		Limits:   []Limit{PerDay(9500, la), PerWindow(400, 100*time.Second+50*time.Millisecond)},
		Quotas:   []int64{10000, 420},
		InFlight: 20, ReserveUnits: 20, ReservePercent: 5, Transit: 50 * time.Millisecond,
	}
	if err := l.Describe(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := l.description(ctx, "project-a", "pool")
	if err != nil || !ok {
		t.Fatalf("Description: %v, %v", ok, err)
	}
	if got.Scope != want.Scope || got.Bucket != want.Bucket || got.InFlight != 20 || got.ReservePercent != 5 ||
		len(got.Limits) != 2 || got.Limits[0].String() != want.Limits[0].String() || got.Limits[1] != want.Limits[1] ||
		got.Quotas[0] != 10000 || got.Transit != want.Transit {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if _, ok, err := l.description(ctx, "project-a", "other"); ok || err != nil {
		t.Errorf("a bucket never described: %v, %v; want none", ok, err)
	}
	// It lasts as long as a calendar day's windows could.
	ttl := b.client.TTL(ctx, l.descriptionKey("project-a", "pool")).Val()
	if ttl < 49*time.Hour || ttl > 50*time.Hour {
		t.Errorf("TTL %v, want 50h for a day's limit", ttl)
	}
	// What cannot be read exactly is refused, never misread.
	b.client.Set(ctx, l.descriptionKey("project-a", "old"), `{"v":2,"limits":[]}`, time.Minute)
	if _, _, err := l.description(ctx, "project-a", "old"); !errors.Is(err, ErrFormat) {
		t.Errorf("a description of version 2: %v, want ErrFormat", err)
	}
	if err := l.Describe(ctx, Description{Scope: "s", Bucket: "b"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a description without limits: %v, want ErrInvalid", err)
	}

	// An announced first limit follows the newest announcement, less the
	// reserve, its window lengthened by Transit.
	gh := Description{Scope: "s", Bucket: "core", Limits: []Limit{{Units: 0, Window: time.Hour, Fixed: true, Name: "announced"}},
		Announced: "github/core", ReservePercent: 5, Transit: 50 * time.Millisecond}
	if lims := gh.Enforced(Announced{}, false); len(lims) != 0 {
		t.Errorf("an unlearned limit: %v, want none", lims)
	}
	reset := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	lims := gh.Enforced(Announced{Limit: 5000, Window: time.Hour, Reset: reset}, true)
	if len(lims) != 1 || lims[0].Units != 4750 || lims[0].Window != time.Hour+50*time.Millisecond || !lims[0].Ends.Equal(reset) {
		t.Errorf("learned limit %+v, want 4750 a fixed hour and 50ms ending at %v", lims, reset)
	}
}

func testSurvey(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t, opPrefix(t))
	if got, err := l.survey(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("an empty prefix: %v, %v; want nothing", got, err)
	}
	w := PerWindow(100, time.Minute)
	la := mustLoad(t, "America/Los_Angeles")
	mustAllow(t, l, "project-a", charge("pool", 5, w, PerDay(1000, la)), charge("search", 1, w))
	hostile := "a scope {with} braces: and spaces"
	mustAllow(t, l, hostile, charge("pool", 1, w))
	mustAllow(t, l, "unnamed scope", charge("pool", 1, w))
	if err := l.Describe(ctx, Description{Scope: hostile, Bucket: "pool", Limits: []Limit{w}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Pause(ctx, "project-a", "search", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Pause(ctx, "project-b", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := l.survey(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Scope)
	}
	hashed := keyPart("unnamed scope")
	want := []string{hashed, hostile, "project-a", "project-b"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("scopes %q, want %q", names, want)
	}
	if !got[0].Hashed || got[1].Hashed || got[1].Buckets[0].Description == nil {
		t.Errorf("a hashed name is known through its description only: %+v", got[:2])
	}
	a := got[2]
	if len(a.Buckets) != 2 || a.Buckets[0].Bucket != "pool" || a.Buckets[1].Bucket != "search" || a.Paused {
		t.Fatalf("project-a: %+v", a)
	}
	if ws := strings.Join(a.Buckets[0].Windows, ","); ws != "day@America/Los_Angeles,w1m0s" {
		t.Errorf("pool's windows %q", ws)
	}
	if !a.Buckets[1].Paused || a.Buckets[0].Paused {
		t.Errorf("only search is paused: %+v", a.Buckets)
	}
	if !got[3].Paused || len(got[3].Buckets) != 0 {
		t.Errorf("project-b: %+v, want a scope pause and no bucket", got[3])
	}
	// One scope, by its name or by the hash the survey shows.
	for _, name := range []string{"project-a", hashed, hostile} {
		one, err := l.survey(ctx, name)
		if err != nil || len(one) != 1 {
			t.Errorf("Survey(%q): %v, %v; want one scope", name, one, err)
		}
	}
	if none, err := l.survey(ctx, "project-z"); err != nil || len(none) != 0 {
		t.Errorf("Survey of a scope without keys: %v, %v", none, err)
	}
}

func testPauseWithReason(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	l := b.limiter(t, opPrefix(t), WithClock(clock.Now))
	p, err := l.PauseBecause(ctx, "s", "pool", time.Hour, "deploy rollback")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Until.Equal(clock.Now().Add(time.Hour)) || p.Reason != "deploy rollback" {
		t.Errorf("pause %+v", p)
	}
	// A shorter pause leaves the longer in force, reason and all.
	p, err = l.PauseBecause(ctx, "s", "pool", time.Minute, "a 429")
	if err != nil || !p.Until.Equal(clock.Now().Add(time.Hour)) || p.Reason != "deploy rollback" {
		t.Errorf("a shorter pause: %+v, %v; want the hour's", p, err)
	}
	got, err := l.PauseOf(ctx, "s", "pool")
	if err != nil || !got.Until.Equal(p.Until) || got.Reason != "deploy rollback" {
		t.Errorf("PauseOf: %+v, %v", got, err)
	}
	// The decisions see it, as they see Pause's.
	r := mustAllow(t, l, "s", charge("pool", 1, PerWindow(10, time.Minute)))
	if r.OK() || r.RetryAfter() != time.Hour {
		t.Errorf("a decision during the pause: ok %v, retry after %v", r.OK(), r.RetryAfter())
	}
	// A longer pause replaces it; one without a reason drops the old reason.
	clock.Add(time.Minute)
	if p, err = l.PauseBecause(ctx, "s", "pool", 2*time.Hour, ""); err != nil || p.Reason != "" {
		t.Errorf("a longer pause without a reason: %+v, %v", p, err)
	}
	if got, _ := l.PauseOf(ctx, "s", "pool"); got.Reason != "" || !got.Until.Equal(clock.Now().Add(2*time.Hour)) {
		t.Errorf("PauseOf after a longer pause: %+v", got)
	}
	if got, err := l.PauseOf(ctx, "s", ""); err != nil || !got.Until.IsZero() {
		t.Errorf("the scope is not paused: %+v, %v", got, err)
	}
	for _, bad := range []string{strings.Repeat("x", quotapath.MaxReason+1), "\xff"} {
		if _, err := l.PauseBecause(ctx, "s", "", time.Minute, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("reason %q: %v, want ErrInvalid", bad, err)
		}
	}
	b.client.Set(ctx, pauseKey(l.scopeKey("t"), ""), "#2:123", time.Minute)
	if _, err := l.PauseOf(ctx, "t", ""); !errors.Is(err, ErrFormat) {
		t.Errorf("a pause of another format: %v, want ErrFormat", err)
	}
	if _, err := l.PauseBecause(ctx, "t", "", time.Minute, "x"); !errors.Is(err, ErrFormat) {
		t.Errorf("pausing over a pause of another format: %v, want ErrFormat", err)
	}
}

// testPauseSaysWhose: a pause says whether an upstream's answer set it
// (Pause, PauseUpstream) or an operator (PauseBecause); a longer pause of
// the other kind takes its place, a shorter one leaves it; PauseAmong
// reads the one that ends last among a scope and its buckets; resume
// lifts the mark with the pause; a survey sees no bucket in the mark.
func testPauseSaysWhose(t *testing.T, b *backend) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	l := b.limiter(t, opPrefix(t), WithClock(clock.Now))
	p, err := l.pauseUpstream(ctx, "s", "", time.Minute, "the upstream answered 429 to e")
	if err != nil || !p.Upstream || p.Reason != "the upstream answered 429 to e" {
		t.Fatalf("PauseUpstream: %+v, %v", p, err)
	}
	if p, err = l.PauseBecause(ctx, "s", "", time.Second, "shorter"); err != nil || !p.Upstream {
		t.Errorf("a shorter operator's pause: %+v, %v; want the upstream's in force", p, err)
	}
	if got, err := l.PauseOf(ctx, "s", ""); err != nil || !got.Upstream {
		t.Errorf("PauseOf: %+v, %v; want the upstream's", got, err)
	}
	if p, err = l.PauseBecause(ctx, "s", "", time.Hour, "incident"); err != nil || p.Upstream || p.Reason != "incident" {
		t.Errorf("a longer operator's pause: %+v, %v", p, err)
	}
	if got, err := l.PauseOf(ctx, "s", ""); err != nil || got.Upstream || got.Reason != "incident" {
		t.Errorf("PauseOf after the operator's: %+v, %v", got, err)
	}
	if err := l.Pause(ctx, "s", "pool", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	bucket, got, err := l.pauseAmong(ctx, "s", "", "pool", "search")
	if err != nil || bucket != "pool" || !got.Upstream || !got.Until.Equal(clock.Now().Add(2*time.Hour)) {
		t.Errorf("PauseAmong: %q %+v, %v; want pool's, the upstream's, for 2h", bucket, got, err)
	}
	if bucket, got, err := l.pauseAmong(ctx, "other", "", "pool"); err != nil || bucket != "" || !got.Until.IsZero() {
		t.Errorf("PauseAmong of a scope not paused: %q %+v, %v", bucket, got, err)
	}
	stored, err := l.survey(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range stored {
		for _, bk := range sc.Buckets {
			if bk.Bucket != "pool" {
				t.Errorf("survey found bucket %q; want only pool", bk.Bucket)
			}
		}
	}
	if _, err := l.resume(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	if n := b.client.Exists(ctx, pauseKey(l.scopeKey("s"), "")+"-up", pauseKey(l.scopeKey("s"), "pool")+"-up").Val(); n != 0 {
		t.Errorf("%d upstream marks outlived their pauses", n)
	}
}

func testResume(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t, opPrefix(t))
	for _, bucket := range []string{"", "pool", "search"} {
		if _, err := l.PauseBecause(ctx, "s", bucket, time.Hour, "maintenance"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.PauseBecause(ctx, "other", "pool", time.Hour, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	n, err := l.resume(ctx, "s", "search")
	if err != nil || n != 1 {
		t.Fatalf("resume of one bucket: %d, %v; want 1 lifted", n, err)
	}
	if p, _ := l.PauseOf(ctx, "s", "pool"); p.Until.IsZero() {
		t.Error("resuming search lifted pool's pause")
	}
	if n, err = l.resume(ctx, "s", ""); err != nil || n != 2 {
		t.Fatalf("resume of the scope: %d, %v; want 2 lifted", n, err)
	}
	for _, bucket := range []string{"", "pool"} {
		if p, _ := l.PauseOf(ctx, "s", bucket); !p.Until.IsZero() {
			t.Errorf("bucket %q still paused: %+v", bucket, p)
		}
	}
	if b.client.Exists(ctx, pauseKey(l.scopeKey("s"), "pool")+":why").Val() != 0 {
		t.Error("a reason outlived its pause")
	}
	if p, _ := l.PauseOf(ctx, "other", "pool"); p.Reason != "elsewhere" {
		t.Errorf("another scope's pause: %+v, want untouched", p)
	}
	r := mustAllow(t, l, "s", charge("pool", 1, PerWindow(10, time.Minute)))
	if !r.OK() {
		t.Error("refused after the resume")
	}
	if n, err = l.resume(ctx, "s", ""); err != nil || n != 0 {
		t.Errorf("resuming what is not paused: %d, %v", n, err)
	}
}

func testNotices(t *testing.T, b *backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := b.limiter(t, opPrefix(t))
	// Nobody listens: nothing to wait for.
	reach, err := l.confirm(ctx, time.Second, func(ctx context.Context) error {
		_, err := l.PauseBecause(ctx, "s", "", time.Minute, "x")
		return err
	})
	if err != nil || reach != (access.Reach{}) {
		t.Errorf("Confirm with nobody listening: %+v, %v", reach, err)
	}
	// Two listeners, on limiters of their own, apply what they hear.
	var lns []*Listener
	for range 2 {
		ln, err := b.limiter(t, opPrefix(t)).Listen(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		lns = append(lns, ln)
	}
	heard := make(chan Notice, 4)
	for _, ln := range lns {
		go func() {
			for n := range ln.Notices() {
				if n.Concerns("hot scope", "pool") {
					// On a cluster, the first pause's notice, told before
					// anyone listened, may reach them late through the
					// cluster bus: only this test's scope counts.
					heard <- n
				}
				ln.Applied(ctx, n)
			}
		}()
	}
	reach, err = l.confirm(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := l.PauseBecause(ctx, "hot scope", "pool", 30*time.Second, "incident")
		return err
	})
	if err != nil || reach != (access.Reach{Listening: 2, Applied: 2}) {
		t.Fatalf("Confirm of a pause: %+v, %v; want 2 of 2", reach, err)
	}
	for range 2 {
		n := <-heard
		if n.Resume || n.Left != 30*time.Second || !n.Concerns("hot scope", "pool") ||
			n.Concerns("hot scope", "search") || n.Concerns("hot scope", "") || n.Concerns("other", "pool") {
			t.Errorf("notice %+v", n)
		}
	}
	reach, err = l.confirm(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := l.resume(ctx, "hot scope", "")
		return err
	})
	if err != nil || reach.Applied != 2 {
		t.Fatalf("Confirm of a resume: %+v, %v", reach, err)
	}
	for range 2 {
		n := <-heard
		if !n.Resume || !n.Concerns("hot scope", "") || !n.Concerns("hot scope", "any bucket") {
			t.Errorf("resume notice %+v: a scope's resume concerns its every bucket", n)
		}
	}
	// A listener that does not acknowledge is counted, and waited for no
	// longer than asked.
	mute, err := b.limiter(t, opPrefix(t)).Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	reach, err = l.confirm(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := l.PauseBecause(ctx, "s", "", time.Minute, "")
		return err
	})
	if err != nil || reach != (access.Reach{Listening: 3, Applied: 2}) {
		t.Errorf("Confirm with a mute listener: %+v, %v; want 2 of 3", reach, err)
	}
	// Close ends the notices.
	mute.Close()
	for range mute.Notices() {
	}
}

func testActivity(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t, opPrefix(t))
	w := PerWindow(1000, time.Minute)
	if a, err := l.activity(ctx, "s", "pool", w); err != nil || a.Leases != 0 || a.InFlight != 0 {
		t.Fatalf("nothing under way: %+v, %v", a, err)
	}
	var leases []*Lease
	for range 2 {
		ls, err := l.Lease(ctx, "s", charge("pool", 100, w), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, ls)
	}
	slot, err := l.TakeSlot(ctx, "s", "pool", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release(ctx)
	a, err := l.activity(ctx, "s", "pool", w)
	if err != nil {
		t.Fatal(err)
	}
	if a.Leases != 2 || a.Leased != 200 || a.InFlight != 1 || a.SlotWaiters != 0 || a.LeasedUntil.Before(a.Now) {
		t.Errorf("two leases and a slot: %+v", a)
	}
	leases[0].End(ctx)
	if a, _ = l.activity(ctx, "s", "pool", w); a.Leases != 1 || a.Leased != 100 {
		t.Errorf("after one lease ended: %+v", a)
	}
}
