package tollgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
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

// The announced-quota tests: an upstream with fixed windows, aligned to
// multiples of their length, that tells in every response how much of the
// window is used, in one of the header dialects tollgate reads.

// announcer is such an upstream. Others may spend its quota unseen by
// tollgate (spendOutside).
type announcer struct {
	*httptest.Server
	dialect string
	window  time.Duration

	mu       sync.Mutex
	limit    func(k int64) int64 // the quota of window k
	used     map[int64]int64     // units used per window, by its index (unix ns / window)
	mine     map[int64]int64     // of those, units tollgate's requests used
	refused  int                 // 429s answered to tollgate's requests
	answered bool                // whether the first answer went out
	inFlight int                 // tollgate's requests being answered
	early    int                 // the most of them at once before the first answer went out
	sent     []sentAt            // tollgate's requests, when sent and how answered
	delay    func(*http.Request) time.Duration
}

// sentAt is one request: when tollgate's Transport sent it (the X-Sent
// header stampSent sets), the window it arrived in and whether it was
// refused.
type sentAt struct {
	at      time.Time
	window  int64
	refused bool
}

// newAnnouncer starts an upstream announcing limit per window in dialect;
// configure, if any, sets its limits and delays before it serves (the
// requests come from other processes, so nothing else orders those writes
// before the handlers' reads).
func newAnnouncer(t *testing.T, dialect string, limit int64, window time.Duration, configure ...func(*announcer)) *announcer {
	a := &announcer{dialect: dialect, window: window, limit: func(int64) int64 { return limit },
		used: map[int64]int64{}, mine: map[int64]int64{}}
	for _, c := range configure {
		c(a)
	}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *announcer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	k := now.UnixNano() / int64(a.window)
	end := time.Unix(0, (k+1)*int64(a.window))
	a.mu.Lock()
	limit := a.limit(k)
	ok := a.used[k] < limit
	if ok {
		a.used[k]++
		a.mine[k]++
	} else {
		a.refused++
	}
	if at, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Sent")); err == nil {
		a.sent = append(a.sent, sentAt{at: at, window: k, refused: !ok})
	}
	a.inFlight++
	if !a.answered {
		a.early = max(a.early, a.inFlight)
	}
	used := a.used[k]
	delay := a.delay
	a.mu.Unlock()
	if delay != nil {
		time.Sleep(delay(r))
	}
	announceIn(w.Header(), a.dialect, limit, used, end, a.window, time.Now())
	a.mu.Lock()
	a.inFlight--
	a.answered = true
	a.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(time.Until(end).Seconds()))))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

// spendOutside spends units of the current window, as a client that does
// not use tollgate would.
func (a *announcer) spendOutside(units int64) {
	k := time.Now().UnixNano() / int64(a.window)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used[k]+units <= a.limit(k) {
		a.used[k] += units
	}
}

// announceIn writes what the upstream counts in one dialect's headers.
func announceIn(h http.Header, dialect string, limit, used int64, end time.Time, window time.Duration, now time.Time) {
	remaining := max(limit-used, 0)
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) }
	switch dialect {
	case "github":
		h.Set("X-RateLimit-Limit", strconv.FormatInt(limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("X-RateLimit-Used", strconv.FormatInt(used, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
	case "x":
		h.Set("x-rate-limit-limit", strconv.FormatInt(limit, 10))
		h.Set("x-rate-limit-remaining", strconv.FormatInt(remaining, 10))
		h.Set("x-rate-limit-reset", strconv.FormatInt(end.Unix(), 10))
	case "openai":
		h.Set("x-ratelimit-limit-requests", strconv.FormatInt(limit, 10))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(remaining, 10))
		h.Set("x-ratelimit-reset-requests", end.Sub(now).Round(time.Millisecond).String())
	case "ratelimit":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%s`, limit, secs(window)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%s`, remaining, secs(end.Sub(now))))
	case "ratelimit-trio":
		h.Set("RateLimit-Limit", strconv.FormatInt(limit, 10))
		h.Set("RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("RateLimit-Reset", secs(end.Sub(now)))
	}
}

// announcedName is the name a bucket follows in each dialect.
var announcedName = map[string]string{
	"github": "github/core", "x": "x/default", "openai": "openai/requests",
	"ratelimit": "ratelimit/default", "ratelimit-trio": "ratelimit-trio/default",
}

// wholeSeconds are the dialects that announce a reset as a delay in whole
// seconds: too coarse to tell windows of one second apart, or to follow a
// fixed window, so their upstream's windows last two seconds and the
// bucket's limit is declared sliding (as the README advises).
var wholeSeconds = map[string]bool{"ratelimit": true, "ratelimit-trio": true}

// announcedChildEnv carries an announced-quota worker's configuration.
const announcedChildEnv = "TOLLGATE_ANNOUNCED_CHILD"

type announcedConfig struct {
	Redis, Upstream, Announced string
	Limit                      int64
	Window                     time.Duration
	Sliding                    bool // the bucket's limit is a sliding window, not a fixed one
	Workers                    int
	Start                      time.Time
	Duration                   time.Duration
}

// announcedChild spends one scope from its workers, one unit a request,
// through a Transport whose bucket follows the upstream's announcements.
func announcedChild(raw string) int {
	var cfg announcedConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "announced child:", err)
		return 3
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Workers + 4})
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, "announced child:", err)
		return 3
	}
	table, _ := costs.New(costs.Spec{Buckets: []string{"pool"},
		Rules: []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}}}})
	limit := quota.PerFixedWindow(cfg.Limit, cfg.Window, time.Time{})
	if cfg.Sliding {
		limit = quota.PerWindow(cfg.Limit, cfg.Window)
	}
	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim, Costs: table, Scope: tollgate.Scope("shared-credential"),
		Buckets: map[string]tollgate.Bucket{"pool": {
			Limits: []quota.Limit{limit}, ReservePercent: 10, Follows: cfg.Announced}},
		Policy: tollgate.Policies(tollgate.Policy{MaxWait: 3 * cfg.Window}, nil),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "announced child:", err)
		return 3
	}
	defer tr.Close()
	time.Sleep(time.Until(cfg.Start))
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Start.Add(cfg.Duration))
	defer cancel()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Upstream+"/", nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// TestOutsideSpenderIsCounted: an upstream whose quota a client without
// tollgate spends at 30%, steadily, announces its count in each dialect;
// three processes sharing the credential through tollgate, whose requests
// take 80 ms upstream (their demand, steady, is half again the quota), get
// no 429 after the first announcement, and use at least 60% of what the
// outside spender leaves. Without the announcements (the control), the
// same processes are refused: the test can tell.
func TestOutsideSpenderIsCounted(t *testing.T) {
	for _, dialect := range []string{"github", "ratelimit", "ratelimit-trio", "openai", "x"} {
		t.Run(dialect, func(t *testing.T) {
			refused, mine, left := spendBesideOutsider(t, dialect, announcedName[dialect])
			if refused > 0 {
				t.Errorf("the upstream refused %d of tollgate's requests", refused)
			}
			share := float64(mine) / float64(left)
			t.Logf("%s: tollgate used %d of the %d the outside spender left (%.0f%%)", dialect, mine, left, 100*share)
			if share < 0.6 {
				t.Errorf("tollgate used %.0f%% of what the outside spender left, want at least 60%%", 100*share)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		refused, _, _ := spendBesideOutsider(t, "github", "")
		t.Logf("unannounced: the upstream refused %d of tollgate's requests", refused)
		if refused == 0 {
			t.Error("tollgate was never refused without announcements: the outside spender is not felt")
		}
	})
}

// spendBesideOutsider runs three processes spending through tollgate
// beside an outside spender for four windows, and returns the 429s
// tollgate's requests got, what they spent in the whole windows after the
// first, and what the outside spender left of those.
func spendBesideOutsider(t *testing.T, dialect, announced string) (refused int, mine, left int64) {
	s := redistest.Start(t)
	limit, window := int64(200), time.Second
	if wholeSeconds[dialect] { // the same rate, in windows their resets can tell apart
		limit, window = 400, 2*time.Second
	}
	up := newAnnouncer(t, dialect, limit, window, func(a *announcer) {
		a.delay = func(*http.Request) time.Duration { return 80 * time.Millisecond }
	})
	start := time.Now().Add(1500 * time.Millisecond)
	duration := 4 * window
	stop := make(chan struct{})
	var outside sync.WaitGroup
	outside.Go(func() { // 30% of every window, a unit at a time
		time.Sleep(time.Until(start))
		tick := time.NewTicker(window / time.Duration(limit*3/10))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				up.spendOutside(1)
			case <-stop:
				return
			}
		}
	})
	var cmds []*exec.Cmd
	for range 3 {
		raw, _ := json.Marshal(announcedConfig{Redis: s.Addr, Upstream: up.URL, Announced: announced,
			Limit: limit, Window: window, Workers: 8, Start: start, Duration: duration})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), announcedChildEnv+"="+string(raw))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}
	close(stop)
	outside.Wait()

	up.mu.Lock()
	defer up.mu.Unlock()
	first := start.UnixNano()/int64(window) + 1 // tollgate learns in the window before
	for k := first; k < first+int64(duration/window)-1; k++ {
		mine += up.mine[k]
		left += limit - (up.used[k] - up.mine[k])
	}
	return up.refused, mine, left
}

// TestLearnedLimit: a bucket with no configured limit, tied to an upstream
// that announces 50 per window in the IETF draft's fields (the draft's
// example of 50 per 10 s, in two-second windows a test can wait for), and
// spent by 200 goroutines in two processes (two Transports, each with its
// own limiter, on one Redis). They are let through one at a time until the
// first response, then within the announced limit; when the upstream
// lowers it to 20, then raises it to 40, no request sent after a
// Transport read the new limit in a response is refused, and the raised
// limit is the one enforced.
func TestLearnedLimit(t *testing.T) {
	s := redistest.Start(t)
	const window = 2 * time.Second
	// The run starts with the window after next: the setup below, slow on
	// a loaded machine, is then over before its first window begins.
	base := time.Now().UnixNano()/int64(window) + 2
	var answered atomic.Bool
	up := newAnnouncer(t, "ratelimit", 50, window, func(a *announcer) {
		a.limit = func(k int64) int64 {
			switch {
			case k < base+2:
				return 50
			case k < base+4:
				return 20
			}
			return 40
		}
		a.delay = func(*http.Request) time.Duration {
			if answered.CompareAndSwap(false, true) {
				return 200 * time.Millisecond // long enough for a second request to overlap, were one let through
			}
			return 0
		}
	})
	table, _ := costs.New(costs.Spec{Buckets: []string{"pool"},
		Rules: []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}}}})

	var mu sync.Mutex
	learnedAt := map[int64][]time.Time{} // per limit, when each Transport read it
	start := time.Unix(0, base*int64(window))
	// The raised limit lasts four windows, longer than a request may wait
	// (MaxWait, three): a Transport whose requests all waited through the
	// change (decided again behind holds, on a loaded machine for most of
	// two windows) still sends, and reads 40, before the run ends.
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(8*window))
	defer cancel()
	var wg sync.WaitGroup
	var transports []*tollgate.Transport
	for range 2 {
		lim, err := quota.New(redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 120}))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		tr, err := tollgate.New(tollgate.Config{
			Base: stampSent{http.DefaultTransport}, Limiter: lim, Costs: table, Scope: tollgate.Scope("shared-credential"),
			Buckets: map[string]tollgate.Bucket{"pool": {
				Limits: []quota.Limit{quota.PerFixedWindow(0, window, time.Time{})}, ReservePercent: 10, Follows: "default"}},
			Policy: tollgate.Policies(tollgate.Policy{MaxWait: 3 * window}, nil),
			Trace: tollgate.Trace{Reconciled: func(_ context.Context, r tollgate.Reconciliation) {
				mu.Lock()
				defer mu.Unlock()
				if l := r.Announced.Limit; !seen[l] {
					seen[l] = true
					learnedAt[l] = append(learnedAt[l], time.Now())
				}
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		transports = append(transports, tr)
		client := &http.Client{Transport: tr}
		for range 100 {
			wg.Go(func() {
				time.Sleep(time.Until(start))
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/", nil)
					resp, err := client.Do(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					var qe *tollgate.QuotaError
					if errors.As(err, &qe) {
						select { // as a client would: come back when told
						case <-time.After(qe.RetryAfter):
						case <-ctx.Done():
						}
					}
				}
			})
		}
	}
	wg.Wait()

	up.mu.Lock()
	defer up.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if up.early != 1 {
		t.Errorf("%d requests were in flight at once before the first response, want 1", up.early)
	}
	// The windows of 50 are spent, each within it. One of them may stay
	// empty on a loaded machine: the requests that waited behind the first
	// response are decided again when it announces the limit, like those
	// after each change below.
	for k := base; k < base+2; k++ {
		if up.mine[k] > 50 {
			t.Errorf("window %d: tollgate used %d, more than the announced 50", k-base, up.mine[k])
		}
	}
	if up.mine[base]+up.mine[base+1] == 0 {
		t.Errorf("tollgate used nothing in the windows of 50")
	}
	// Each limit is followed from the response that announced it on: the
	// requests sent after the Transports read it, until the upstream
	// changes it, are never refused. A Transport may learn a limit from
	// the other through Redis instead (the first, 50, before it sends
	// anything; a later one when it records an older response after the
	// other recorded the new limit), and then no response of its own
	// reports it; one that never learned a lowered limit sends beyond it,
	// and is refused.
	for i, l := range []int64{50, 20, 40} {
		if len(learnedAt[l]) == 0 {
			t.Errorf("limit %d: read by no Transport in a response", l)
			continue
		}
		read := slices.MaxFunc(learnedAt[l], time.Time.Compare)
		until := base + 2*int64(i+1) // the window whose limit is the next
		refused := 0
		for _, r := range up.sent {
			if r.refused && r.at.After(read) && r.window < until {
				refused++
			}
		}
		if refused > 0 {
			t.Errorf("limit %d: %d requests sent after the Transports read it were refused", l, refused)
		}
	}
	// The raised limit is the one enforced, by both Transports, and it is
	// spent. How much of it is not checked: after the limit is lowered,
	// the requests that waited are decided again behind holds still
	// queued in later windows (the other Transport's, or their own, given
	// back one by one), so that a window or two after each change stay
	// underused, and the clients told to come back at the same instant
	// wake together (docs/announced.md).
	for i, tr := range transports {
		u, err := tr.Usage(context.Background(), "shared-credential", "pool")
		if err != nil || len(u) == 0 {
			t.Fatalf("Transport %d: Usage = %v, %v", i, u, err)
		}
		if want := int64(40 - 4); u[0].Limit.Units != want { // less the 10% reserve
			t.Errorf("Transport %d enforces %v after the upstream raised its limit to 40, want %d units", i, u[0].Limit, want)
		}
	}
	if up.mine[base+4]+up.mine[base+5]+up.mine[base+6]+up.mine[base+7] == 0 {
		t.Errorf("tollgate used nothing in the windows of 40")
	}
	t.Logf("tollgate used per window: %d %d | %d %d | %d %d %d %d", up.mine[base], up.mine[base+1], up.mine[base+2], up.mine[base+3],
		up.mine[base+4], up.mine[base+5], up.mine[base+6], up.mine[base+7])
}

// TestOutOfOrderAnnouncements: a response delayed behind a later one, and
// one that announces an older window, move nothing backwards: the level
// spent elsewhere stays the higher one, and the limit and reset stay the
// newest's.
func TestOutOfOrderAnnouncements(t *testing.T) {
	s := redistest.Start(t)
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	release := make(chan struct{})
	arrived := make(chan struct{}) // the older request reached the upstream
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/older": // answered last, though it left first: 10 used
			close(arrived)
			<-release
			announceIn(h, "github", 100, 10, reset, 0, time.Now())
		case "/newer": // 60 used
			announceIn(h, "github", 100, 60, reset, 0, time.Now())
		case "/last-window": // the window before, with another limit
			announceIn(h, "github", 5000, 4000, reset.Add(-time.Hour), 0, time.Now())
		}
	}))
	defer up.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	lim, err := quota.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	table, _ := costs.New(costs.Spec{Buckets: []string{"core"},
		Rules: []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "core", Units: 1}}}}})
	var reconciled []tollgate.Reconciliation
	var mu sync.Mutex
	tr, err := tollgate.New(tollgate.Config{
		Limiter: lim, Costs: table, Scope: tollgate.Scope("token"),
		Buckets: map[string]tollgate.Bucket{"core": {
			Limits: []quota.Limit{quota.PerFixedWindow(0, time.Hour, time.Time{})}, Follows: "github/core"}},
		Trace: tollgate.Trace{Reconciled: func(_ context.Context, r tollgate.Reconciliation) {
			mu.Lock()
			defer mu.Unlock()
			reconciled = append(reconciled, r)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	get := func(path string) {
		t.Helper()
		resp, err := client.Get(up.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	used := func() int64 {
		t.Helper()
		u, err := tr.Usage(context.Background(), "token", "core")
		if err != nil || len(u) != 1 {
			t.Fatalf("Usage = %v, %v", u, err)
		}
		if u[0].Limit.Units != 100 {
			t.Errorf("the limit enforced is %v, want the newest announced, 100", u[0].Limit)
		}
		return u[0].Used
	}

	get("/newer") // learns the limit, one request at a time
	older := make(chan struct{})
	go func() {
		defer close(older)
		get("/older")
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	<-arrived // the older request was admitted (and counted) first
	get("/newer")
	level := used()
	if level < 60 {
		t.Fatalf("after the newer response: %d used, want at least the 60 announced", level)
	}
	released = true
	close(release)
	<-older
	if got := used(); got != level {
		t.Errorf("after the delayed older response: %d used, want the %d before it kept", got, level)
	}
	get("/last-window") // spends a unit of its own
	if got := used(); got != level+1 {
		t.Errorf("after a response from the window before: %d used, want the %d before it and its own unit", got, level)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reconciled {
		if r.Announced.Limit == 5000 {
			t.Errorf("the announcement of the window before reconciled: %+v", r)
		}
	}
}
