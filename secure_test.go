package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// The tests of a Redis that lets only tollgate in: a password for its
// default user, and tollgate logged in, by URL, as a user holding only the
// README's ACL line.
const (
	adminPassword = "admin-secret"
	userPassword  = "tollgate-secret"
)

// quickUser is a client logged in as user, tuned like quickClient to
// notice an outage quickly.
func quickUser(t *testing.T, s *redistest.Server, user, password string) *redis.Client {
	t.Helper()
	opt := s.UserOptions(user, password)
	opt.DialTimeout, opt.DialerRetries, opt.MaxRetries = 200*time.Millisecond, 1, 1
	opt.ReadTimeout, opt.WriteTimeout = time.Second, time.Second
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// secureTable charges every kind of call the Transport makes: plain
// decisions, holds, settlements, leases, a cap, background turns and an
// announced quota, each on a bucket of its own.
func secureTable(t *testing.T) *costs.Table {
	t.Helper()
	rule := func(path, bucket string, units int64) costs.Rule {
		return costs.Rule{Pattern: "GET " + path, Endpoint: bucket, Charges: []costs.Charge{{Bucket: bucket, Units: units}}}
	}
	settled := rule("/v1/chat", "tokens", 100)
	settled.Settle = []costs.Settle{{Bucket: "tokens", Header: "X-Cost"}}
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool", "tight", "tokens", "leased", "capped", "backfill", "core"},
		Rules: []costs.Rule{
			rule("/v1/items", "pool", 1), rule("/v1/tight", "tight", 1), settled, rule("/v1/leased", "leased", 1),
			rule("/v1/capped", "capped", 1), rule("/v1/backfill", "backfill", 1), rule("/v1/core", "core", 1),
			rule("/v1/limited", "pool", 1),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestRequirepassInTheURL: a Redis with only requirepass, reached with
// the password in the URL (redis://:PASSWORD@host:port). Decisions work;
// a wrong password is quota.ErrPermission, not an outage, and is not
// shown in the error.
func TestRequirepassInTheURL(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword})
	url := s.URL("", adminPassword)
	if !strings.HasPrefix(url, "redis://:"+adminPassword+"@") {
		t.Fatalf("URL %q does not carry the password alone", url)
	}
	up := newUpstream(t)
	for _, tc := range []struct {
		name, password string
		want           error
	}{{"the password", adminPassword, nil}, {"a wrong password", "not-the-password", quota.ErrPermission}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport(t, tollgate.Config{
				Limiter: limiterOn(t, quickUser(t, s, "", tc.password)), Costs: table(t), Buckets: buckets(100, time.Hour),
				Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailOpen}, nil),
			})
			_, err := get(t, tr, up.URL+"/v1/items")
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("GET: %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), tc.password) {
				t.Errorf("the error %q shows the password", err)
			}
		})
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d requests; want the one admitted", up.count())
	}
	if n := s.Calls(t)["evalsha"] + s.Calls(t)["eval"]; n == 0 {
		t.Error("Redis decided nothing")
	}
}

// TestTransportUnderACL runs every kind of call a Transport makes through
// a Redis that speaks TLS only, as the README's least-privileged user:
// decisions, a hold, a settlement, leases, a cap whose waiter is woken, a
// background turn, an announced quota, Usage, Record, Pause, an upstream's
// 429, and the outage probe across a restart. All of it works, and Redis
// refuses nothing.
func TestTransportUnderACL(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword, TLS: true})
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, quota.DefaultPrefix)...)
	rc := quickUser(t, s, "tollgate", userPassword)

	hour := []quota.Limit{quota.PerWindow(1000, time.Hour)}
	release := make(chan struct{})
	var reconciled atomic.Int64
	var switches []tollgate.Switch
	var mu sync.Mutex
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat":
			w.Header().Set("X-Cost", "17")
		case "/v1/capped":
			<-release
		case "/v1/core":
			announceIn(w.Header(), "github", 100, 40, time.Now().Add(time.Hour), time.Hour, time.Now())
		case "/v1/limited":
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	})
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: secureTable(t), Transit: -1,
		Buckets: map[string]tollgate.Bucket{
			"pool": {Limits: hour}, "tokens": {Limits: hour}, "leased": {Limits: hour},
			"tight":    {Limits: []quota.Limit{quota.PerWindow(2, 300*time.Millisecond)}},
			"capped":   {Limits: hour, MaxInFlight: 1},
			"backfill": {Limits: []quota.Limit{quota.PerWindow(2, 300*time.Millisecond)}},
			"core":     {Limits: []quota.Limit{quota.PerFixedWindow(0, time.Hour, time.Time{})}, Follows: "github/core"},
		},
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: 5 * time.Second},
			map[string]tollgate.Policy{"backfill": {MaxWait: 5 * time.Second, Priority: quota.Background}}),
		Lease: func(scope, bucket string) (int64, time.Duration) {
			if bucket == "leased" {
				return 10, time.Second
			}
			return 0, 0
		},
		Trace: tollgate.Trace{
			Reconciled: func(context.Context, tollgate.Reconciliation) { reconciled.Add(1) },
			Switched: func(_ context.Context, sw tollgate.Switch) {
				mu.Lock()
				switches = append(switches, sw)
				mu.Unlock()
			},
		},
	})
	ctx := t.Context()
	mustSend := func(path string) {
		t.Helper()
		if _, err := get(t, tr, up.URL+path); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}

	for _, path := range []string{"/v1/items", "/v1/tight", "/v1/tight", "/v1/tight"} { // the third tight call waits for a hold
		mustSend(path)
	}
	mustSend("/v1/chat") // settled to 17
	for range 12 {       // more than one lease of 10
		mustSend("/v1/leased")
	}
	for range 3 { // the third waits in the background room
		mustSend("/v1/backfill")
	}
	for range 2 { // the first learns the limit, the second is decided under it
		mustSend("/v1/core")
	}
	// Two calls of a cap of one: the second waits for the first's slot,
	// and is woken by a message when it is handed over.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { mustSend("/v1/capped") })
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()

	if err := tr.Record(ctx, tollgate.DefaultScope, "pool", 5); err != nil {
		t.Fatal(err)
	}
	usage, err := tr.Usage(ctx, tollgate.DefaultScope, "tokens")
	if err != nil || len(usage) != 1 || usage[0].Used != 17 {
		t.Errorf("tokens after settling: %+v, %v; want 17 used", usage, err)
	}
	usage, err = tr.Usage(ctx, tollgate.DefaultScope, "pool")
	if err != nil || len(usage) != 1 || usage[0].Used != 6 {
		t.Errorf("pool after a call and a record of 5: %+v, %v; want 6 used", usage, err)
	}
	if reconciled.Load() == 0 {
		t.Error("the announcement of 40 used by others was never reconciled")
	}
	var tight []time.Time
	up.mu.Lock()
	for _, a := range up.arrivals {
		if a.path == "/v1/tight" {
			tight = append(tight, a.at)
		}
	}
	up.mu.Unlock()
	if len(tight) != 3 || tight[2].Sub(tight[0]) < 250*time.Millisecond {
		t.Errorf("the tight calls arrived at %v; want the third a window after the first", tight)
	}

	calls := s.Calls(t)
	for _, cmd := range []string{"evalsha", "subscribe", "publish", "zadd", "rpush"} {
		if calls[cmd] == 0 {
			t.Errorf("Redis ran no %s: the calls above did not exercise what they should; ran %v", cmd, calls)
		}
	}

	// The outage probe: Redis restarts (and forgets its users, which come
	// back with it), and decisions return to it by themselves.
	s.Kill()
	if _, err := get(t, tr, up.URL+"/v1/items"); !errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("with Redis down: %v, want ErrUnavailable", err)
	}
	s.Restart(t)
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, quota.DefaultPrefix)...)
	var after error
	for range 100 {
		time.Sleep(50 * time.Millisecond)
		if _, after = get(t, tr, up.URL+"/v1/items"); after == nil {
			break
		}
	}
	if after != nil {
		t.Errorf("after Redis came back: %v", after)
	}
	// An upstream's 429 pauses the scope, for the calls after it too; so
	// does Pause.
	if _, err := get(t, tr, up.URL+"/v1/limited"); !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("a 429: %v, want a *QuotaError", err)
	}
	var qe *tollgate.QuotaError
	if _, err := get(t, tr, up.URL+"/v1/items"); !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream {
		t.Errorf("a call after the 429: %v, want refused for the upstream's pause", err)
	}
	if err := tr.Pause(ctx, "other", "", time.Minute); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	if len(switches) != 2 || switches[0].Up || !switches[1].Up {
		t.Errorf("switches %+v, want down then up", switches)
	}
	mu.Unlock()
	if refused := s.ACLRefusals(t); len(refused) > 0 {
		t.Errorf("Redis refused tollgate's user %d times:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// TestTwoApplicationsOnOneRedis: two applications share a Redis, each
// with its own prefix and its own user. Each counts only its own calls,
// neither can read, write or subscribe to what the other keeps, and every
// key either writes lies under its own prefix. Only key names leak, to a
// user allowed SCAN.
func TestTwoApplicationsOnOneRedis(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword})
	apps := []struct{ user, prefix string }{{"app-a", "app-a:"}, {"app-b", "app-b:"}}
	clients := make([]*redis.Client, len(apps))
	transports := make([]*tollgate.Transport, len(apps))
	up := newUpstream(t)
	for i, app := range apps {
		s.SetUser(t, redistest.ACL(t, app.user, userPassword, app.prefix)...)
		clients[i] = s.UserClient(t, app.user, userPassword)
		transports[i] = newTransport(t, tollgate.Config{
			Limiter: limiterOn(t, clients[i], quota.WithPrefix(app.prefix)), Costs: table(t),
			Buckets: buckets(100, time.Hour), Scope: tollgate.Scope("shared-name"),
		})
	}
	ctx := t.Context()
	for i, tr := range transports {
		for range 3 * (i + 1) { // 3 calls for a, 6 for b
			if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, tr := range transports {
		usage, err := tr.Usage(ctx, "shared-name", "pool")
		if err != nil || len(usage) != 1 || usage[0].Used != int64(3*(i+1)) {
			t.Errorf("%s counts %+v, %v; want only its own %d calls", apps[i].user, usage, err, 3*(i+1))
		}
	}
	keys, err := s.Client(t).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range apps {
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, app.prefix) }) {
			t.Errorf("no key of %s among %v", app.user, keys)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "app-a:") && !strings.HasPrefix(k, "app-b:") {
			t.Errorf("key %q lies under neither prefix", k)
		}
	}
	// a reads, writes and subscribes to b's: every attempt is refused.
	var bKey string
	for _, k := range keys {
		if strings.HasPrefix(k, "app-b:") {
			bKey = k
		}
	}
	a := clients[0]
	for name, err := range map[string]error{
		"GET":       a.Get(ctx, bKey).Err(),
		"SET":       a.Set(ctx, bKey, "0", 0).Err(),
		"DEL":       a.Del(ctx, bKey).Err(),
		"EVAL":      a.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{bKey}).Err(),
		"SUBSCRIBE": subscribeErr(ctx, a, "app-b:{shared-name}:pool:slots"),
		"KEYS":      a.Keys(ctx, "*").Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s of app-b's %s as app-a: %v, want NOPERM", name, bKey, err)
		}
	}
	// A user allowed SCAN lists the names under b's prefix, though it
	// may read none of them: Redis does not filter a command without key
	// arguments by key patterns. The README says so.
	s.SetUser(t, apps[0].user, "+scan")
	names, _, err := a.Scan(ctx, 0, "app-b:*", 1000).Result()
	if err != nil || !slices.Contains(names, bKey) {
		t.Errorf("SCAN of app-b's names as app-a with +scan: %v, %v; want %s listed", names, err, bKey)
	}
	if err := a.Get(ctx, bKey).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("GET of a name SCAN listed: %v, want NOPERM", err)
	}
	// b's limiter, under a's user, is refused with quota.ErrPermission.
	lim := limiterOn(t, a, quota.WithPrefix("app-b:"), quota.WithPipelines(0))
	if _, err := lim.Allow(ctx, "shared-name", quota.Demand{Bucket: "pool", Units: 1, Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}); !errors.Is(err, quota.ErrPermission) {
		t.Errorf("a limiter on app-b's prefix as app-a: %v, want quota.ErrPermission", err)
	}
}

// subscribeErr subscribes c to channel and returns what Redis answered.
func subscribeErr(ctx context.Context, c *redis.Client, channel string) error {
	ps := c.Subscribe(ctx)
	defer ps.Close()
	if err := ps.Subscribe(ctx, channel); err != nil {
		return err
	}
	_, err := ps.Receive(ctx)
	return err
}

// TestPermissionRefusedIsNoOutage: a Redis user that lacks a right tollgate
// needs is a configuration error, not an outage. Even an endpoint that
// fails open sends nothing unmetered: the caller gets quota.ErrPermission,
// and the Transport never switches to its outage modes.
func TestPermissionRefusedIsNoOutage(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword})
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, "elsewhere:")...)
	up := newUpstream(t)
	var switched atomic.Int64
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, quickUser(t, s, "tollgate", userPassword)), Costs: table(t), Buckets: buckets(100, time.Hour),
		Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailOpen}, nil),
		Trace:  tollgate.Trace{Switched: func(context.Context, tollgate.Switch) { switched.Add(1) }, Decided: d.hook},
	})
	for i := range 3 {
		_, err := get(t, tr, up.URL+"/v1/items")
		if !errors.Is(err, quota.ErrPermission) || errors.Is(err, tollgate.ErrUnavailable) {
			t.Fatalf("call %d: %v, want quota.ErrPermission", i, err)
		}
		if i == 0 {
			t.Log(err)
			if !strings.Contains(err.Error(), `endpoint "items.list"`) || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("the error %q names neither the endpoint nor what Redis refused", err)
			}
		}
	}
	if up.count() != 0 || switched.Load() != 0 {
		t.Errorf("the upstream received %d requests and the Transport switched %d times; want none", up.count(), switched.Load())
	}
	for _, ev := range d.list() {
		if ev.Admitted || ev.Unmetered {
			t.Errorf("decision %+v: want refused", ev)
		}
	}
}
