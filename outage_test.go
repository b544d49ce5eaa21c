package tollgate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/quota"
)

// switches records the switch hook's events.
type switches struct {
	mu  sync.Mutex
	ups []bool
}

func (s *switches) hook(_ context.Context, sw tollgate.Switch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ups = append(s.ups, sw.Up)
}

func (s *switches) list() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.ups...)
}

// untilAdmittedOnRedis sends requests until one is decided on Redis again,
// moving the Transport's clock a second between them so that each may
// probe, and returns how long that took after the first try.
func untilAdmittedOnRedis(t *testing.T, tr *tollgate.Transport, clock *testclock.Clock, url string, d *decisions) time.Duration {
	t.Helper()
	start := time.Now()
	for i := 0; i < 50; i++ {
		_, err := get(t, tr, url)
		evs := d.list()
		if err == nil && mode(evs[len(evs)-1]) == "redis" {
			return time.Since(start)
		}
		clock.Add(time.Second)
	}
	t.Fatal("decisions never returned to Redis")
	return 0
}

// TestOutageModes kills Redis under a Transport, checks that each outage
// mode does what it says, restarts Redis on the same port, and checks that
// decisions return to it by themselves, with the outage's spending recorded.
func TestOutageModes(t *testing.T) {
	cases := []struct {
		outage tollgate.Outage
		check  func(t *testing.T, tr *tollgate.Transport, up *upstream, d *decisions, url string)
	}{
		{tollgate.FailClosed, func(t *testing.T, tr *tollgate.Transport, up *upstream, d *decisions, url string) {
			for range 3 {
				_, err := get(t, tr, url)
				var ue *tollgate.UnavailableError
				if !errors.As(err, &ue) || !errors.Is(err, quota.ErrRedis) {
					t.Fatalf("fail closed: %v, want an *UnavailableError wrapping the Redis failure", err)
				}
			}
			if up.count() != 0 {
				t.Errorf("fail closed sent %d requests", up.count())
			}
		}},
		{tollgate.FailOpen, func(t *testing.T, tr *tollgate.Transport, up *upstream, d *decisions, url string) {
			for range 3 {
				if _, err := get(t, tr, url); err != nil {
					t.Fatalf("fail open: %v", err)
				}
			}
			if up.count() != 3 {
				t.Errorf("fail open sent %d of 3 requests", up.count())
			}
			for _, ev := range d.list() {
				if mode(ev) != "open" || !ev.Admitted {
					t.Errorf("fail open reported %+v, want admitted in mode open", ev)
				}
			}
		}},
		{tollgate.FailLocal, func(t *testing.T, tr *tollgate.Transport, up *upstream, d *decisions, url string) {
			// LocalShare 0.25 of a pool of 20: five calls, then refusals.
			admitted := 0
			for range 8 {
				_, err := get(t, tr, url)
				switch {
				case err == nil:
					admitted++
				case !errors.Is(err, tollgate.ErrQuotaExhausted):
					t.Fatalf("local: %v", err)
				}
			}
			if admitted != 5 || up.count() != 5 {
				t.Errorf("local admitted %d and sent %d, want 5 of a 25%% share of 20", admitted, up.count())
			}
			for _, ev := range d.list() {
				if mode(ev) != "local" {
					t.Errorf("local reported mode %v", mode(ev))
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.outage.String(), func(t *testing.T) {
			srv, rc := realRedis(t)
			lim := limiterOn(t, rc)
			up := newUpstream(t)
			var d decisions
			var sw switches
			pool := quota.PerWindow(20, time.Hour)
			tr := newTransport(t, tollgate.Config{Transit: -1,
				Limiter: lim, Costs: table(t), Buckets: buckets(20, time.Hour),
				Policy:       tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse, OnOutage: c.outage}, nil),
				LocalLimiter: inProcess(t), LocalShare: 0.25,
				Trace: tollgate.Trace{Decided: d.hook, Switched: sw.hook},
			})
			defer tr.Close()
			clock := testclock.New(time.Now())
			tollgate.SetClock(tr, clock.Now)
			url := up.URL + "/v1/items"
			if _, err := get(t, tr, url); err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			d.reset()
			up.reset()

			c.check(t, tr, up, &d, url)
			if got := sw.list(); len(got) != 1 || got[0] {
				t.Errorf("switches = %v, want one switch away from Redis", got)
			}

			srv.Restart(t) // an empty Redis on the same port
			took := untilAdmittedOnRedis(t, tr, clock, url, &d)
			if took > 2*time.Second {
				t.Errorf("decisions returned to Redis %v after it answered again, want within about a second", took)
			}
			if got := sw.list(); len(got) != 2 || !got[1] {
				t.Errorf("switches = %v, want away from Redis, then back", got)
			}
			// The restarted Redis lost everything; it must now count what was
			// spent during the outage (recorded on recovery) and since.
			var off, on int64
			for _, ev := range d.list() {
				switch {
				case !ev.Admitted:
				case mode(ev) == "redis":
					on++
				default:
					off++
				}
			}
			u, err := lim.Usage(context.Background(), tollgate.DefaultScope, "pool", pool)
			if err != nil {
				t.Fatal(err)
			}
			if u.Used != off+on {
				t.Errorf("Redis counts %d units after the outage, want %d (%d spent during it, %d since)", u.Used, off+on, off, on)
			}
		})
	}
}
