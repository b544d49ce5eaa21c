package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/windowcheck"
	"github.com/tollgate/tollgate/quota/embedded"
)

// workers sends requests through a Transport from n goroutines until
// stopped, sorting the outcomes.
type workers struct {
	wg                         sync.WaitGroup
	stop                       atomic.Bool
	sent, refused, unavailable atomic.Int64
	mu                         sync.Mutex
	others                     []error
}

func startWorkers(t *testing.T, tr http.RoundTripper, n int, url string) *workers {
	return startPacedWorkers(t, tr, n, url, 0)
}

// startPacedWorkers is startWorkers with a pause after every request.
func startPacedWorkers(t *testing.T, tr http.RoundTripper, n int, url string, pause time.Duration) *workers {
	w := &workers{}
	for range n {
		w.wg.Go(func() {
			for i := 0; i < 1_000_000 && !w.stop.Load(); i++ {
				time.Sleep(pause)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := send(t, tr, ctx, "GET", url, nil)
				cancel()
				switch {
				case err == nil:
					w.sent.Add(1)
				case errors.Is(err, tollgate.ErrQuotaExhausted):
					w.refused.Add(1)
					time.Sleep(time.Millisecond)
				case errors.Is(err, tollgate.ErrUnavailable):
					w.unavailable.Add(1)
					time.Sleep(time.Millisecond)
				default:
					w.mu.Lock()
					w.others = append(w.others, err)
					w.mu.Unlock()
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	return w
}

func (w *workers) finish() []error {
	w.stop.Store(true)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.others
}

// TestRedisKilledMidRun kills Redis under eight busy goroutines, once per
// outage mode, checks that the mode does what it says while Redis is away,
// restarts Redis on the same port, and checks that decisions return to it
// within a second, with nothing left running afterwards.
func TestRedisKilledMidRun(t *testing.T) {
	for _, outage := range []tollgate.Outage{tollgate.FailClosed, tollgate.FailOpen, tollgate.FailLocal} {
		t.Run(outage.String(), func(t *testing.T) {
			before := tollgateGoroutines()
			srv, rc := realRedis(t)
			up := newUpstream(t)
			var d decisions
			var switchedUp atomic.Int64 // unix ns of the switch back
			window := 500 * time.Millisecond
			const limit, share = 400, 0.25
			localRdb, err := embedded.New()
			if err != nil {
				t.Fatal(err)
			}
			tr := newTransport(t, tollgate.Config{
				Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(limit, window),
				Policy:       tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse, OnOutage: outage}, nil),
				LocalLimiter: limiterOn(t, localRdb), LocalShare: share,
				Trace: tollgate.Trace{
					Decided: d.hook,
					Switched: func(_ context.Context, s tollgate.Switch) {
						if s.Up {
							switchedUp.Store(time.Now().UnixNano())
						}
					},
				},
			})
			w := startWorkers(t, tr, 8, up.URL+"/v1/items")
			time.Sleep(300 * time.Millisecond)
			srv.Kill()
			killed := time.Now()
			time.Sleep(700 * time.Millisecond)
			srv.Restart(t)
			restarted := time.Now()
			for i := 0; switchedUp.Load() == 0 && i < 300; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			others := w.finish()
			tr.Close()
			tr.CloseIdleConnections()
			localRdb.Close()

			for _, err := range others {
				t.Errorf("unexpected error: %v", err)
			}
			if switchedUp.Load() == 0 {
				t.Fatal("decisions never returned to Redis")
			}
			if took := time.Unix(0, switchedUp.Load()).Sub(restarted); took > time.Second {
				t.Errorf("decisions returned to Redis %v after it answered again, want within a second", took)
			}
			var admitted, byMode = 0, map[string]int{}
			var local []windowcheck.Call
			for _, ev := range d.list() {
				if ev.Admitted {
					admitted++
					byMode[mode(ev)]++
					if mode(ev) == "local" {
						local = append(local, windowcheck.Call{At: ev.At, Units: 1})
					}
				}
			}
			if admitted != up.count() {
				t.Errorf("%d requests admitted, but the upstream received %d: something was sent unreported", admitted, up.count())
			}
			t.Logf("admitted by mode: %v; refused %d, unavailable %d; outage from %v", byMode, w.refused.Load(), w.unavailable.Load(), killed.Format(time.StampMilli))
			switch outage {
			case tollgate.FailClosed:
				if byMode["open"]+byMode["local"] != 0 || w.unavailable.Load() == 0 {
					t.Errorf("fail closed: %v admitted off Redis, %d unavailable; want none and some", byMode, w.unavailable.Load())
				}
			case tollgate.FailOpen:
				if byMode["open"] == 0 {
					t.Error("fail open: no request was reported sent unmetered")
				}
			case tollgate.FailLocal:
				most, at := windowcheck.Most(local, window+tollgate.DefaultTransit)
				if own := int64(limit * share); most > own || byMode["local"] == 0 {
					t.Errorf("local: %d units in the window ending %v, over this process's share of %d (or none at all)", most, at, own)
				}
			}
			waitNoTollgateGoroutines(t, before)
		})
	}
}

// TestScriptFlushAndClientKillMidRun empties the script cache and kills
// every client connection again and again under busy goroutines: no error
// may reach a caller, and the Transport must never think Redis is down.
func TestScriptFlushAndClientKillMidRun(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 3})
	defer rc.Close()
	admin := srv.Client(t)
	up := newUpstream(t)
	var switches atomic.Int32
	tr := newTransport(t, tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: table(t), Buckets: buckets(1_000_000, time.Second),
		Trace: tollgate.Trace{Switched: func(context.Context, tollgate.Switch) { switches.Add(1) }},
	})
	w := startWorkers(t, tr, 8, up.URL+"/v1/items")
	ctx := context.Background()
	for i := range 40 {
		time.Sleep(15 * time.Millisecond)
		var err error
		if i%2 == 0 {
			err = admin.ScriptFlush(ctx).Err()
		} else {
			err = admin.ClientKillByFilter(ctx, "TYPE", "normal").Err()
		}
		if err != nil {
			t.Fatalf("disruption %d: %v", i, err)
		}
	}
	others := w.finish()
	for _, err := range others {
		t.Errorf("error surfaced to a caller: %v", err)
	}
	if n := w.unavailable.Load() + w.refused.Load(); n > 0 {
		t.Errorf("%d requests failed during the disruptions", n)
	}
	if switches.Load() > 0 {
		t.Errorf("the Transport switched away from Redis %d times", switches.Load())
	}
	if w.sent.Load() < 100 {
		t.Errorf("only %d requests went through: the test did not load the Transport", w.sent.Load())
	}
}
