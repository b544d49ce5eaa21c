package tollgate_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

// modulePath is the import path of tollgate's module: goroutines are told
// apart by the packages of the functions they run, never by the files
// those are in, which lie wherever the repository was cloned.
const modulePath = "github.com/tollgate/tollgate"

// helperPackages are the module's packages that only tests and demos run:
// their goroutines (a redis-server's cmd.Wait, a simulator's handlers) are
// the tests' own, not tollgate's. Every internal/*sim is one too.
var helperPackages = []string{
	modulePath + "/internal/redistest",
	modulePath + "/internal/testclock",
	modulePath + "/internal/windowcheck",
}

// engineFrame reports whether a stack frame's function, line fn of a
// goroutine dump (as "pkg/path.(*T).Method(args)"), is tollgate's own
// code or an in-process Redis (miniredis, which quota/embedded runs);
// file is the frame's next line, its "\tpath/name.go:line +0x..". Code of
// test packages (package x_test, or the _test.go files of package x) and
// of the test helpers is not.
func engineFrame(fn, file string) bool {
	pkg := framePackage(fn)
	if strings.HasPrefix(pkg, "github.com/alicebob/miniredis/") {
		return true
	}
	if pkg != modulePath && !strings.HasPrefix(pkg, modulePath+"/") {
		return false
	}
	base := file[strings.LastIndexAny(file, `/\`)+1:] // the file's name: "x_test.go:12 +0x25"
	if strings.HasSuffix(pkg, "_test") || strings.Contains(base, "_test.go:") {
		return false
	}
	if slices.Contains(helperPackages, pkg) {
		return false
	}
	if rest, ok := strings.CutPrefix(pkg, modulePath+"/internal/"); ok && !strings.Contains(rest, "/") && strings.HasSuffix(rest, "sim") {
		return false
	}
	return true
}

// framePackage returns the import path of the package of a frame's
// function: what precedes the first dot after the last slash of its name
// ("runtime" for "runtime.gopark(...)").
func framePackage(fn string) string {
	name := fn
	if i := strings.IndexAny(name, "(["); i >= 0 { // (args), (*T).Method, [generic]
		name = name[:i]
	}
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// ownStacks returns the goroutines of dump (as runtime.Stack writes all of
// them) that run tollgate's own code: that have a frame engineFrame
// accepts. The line saying which function created a goroutine does not
// count: a goroutine a test started to call the engine is the engine's
// while it is in there, and one tollgate started that now runs only
// others' code is not.
func ownStacks(dump string) []string {
	var out []string
	for _, g := range strings.Split(strings.TrimSpace(dump), "\n\n") {
		lines := strings.Split(g, "\n")
		for i := 1; i < len(lines); i++ { // lines[0]: "goroutine 7 [select]:"
			fn := lines[i]
			if fn == "" || strings.HasPrefix(fn, "\t") || strings.HasPrefix(fn, "created by ") || strings.HasPrefix(fn, "...") {
				continue
			}
			file := ""
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
				file = lines[i+1]
			}
			if engineFrame(fn, file) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// tollgateStacks returns the stacks of the goroutines that now run
// tollgate's own code (see ownStacks).
func tollgateStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return ownStacks(string(buf[:n]))
		}
		buf = make([]byte, 2*len(buf))
	}
}

func tollgateGoroutines() int { return len(tollgateStacks()) }

// waitNoTollgateGoroutines fails the test if, within two seconds, more such
// goroutines run than before it started.
func waitNoTollgateGoroutines(t *testing.T, before int) {
	t.Helper()
	var stacks []string
	for range 200 {
		if stacks = tollgateStacks(); len(stacks) <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines still run tollgate code (%d before):\n%s", len(stacks), before, strings.Join(stacks, "\n\n"))
}

// TestNoGoroutineOutlivesARoundTrip: once RoundTrip has returned (sent,
// waited, refused, cancelled), the Transport is closed (after its FailLocal
// limiter ran) and the in-process Redis stopped, nothing of tollgate's
// keeps running.
func TestNoGoroutineOutlivesARoundTrip(t *testing.T) {
	before := tollgateGoroutines()
	up := newUpstream(t)
	window := 200 * time.Millisecond
	rdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	localRdb, err := embedded.New()
	if err != nil {
		t.Fatal(err)
	}
	own, local := limiterOn(t, rdb), limiterOn(t, localRdb)
	down := limiterOn(t, quickClient(t, "127.0.0.1:1"))
	for _, lim := range []*quota.Limiter{own, down} {
		tr := newTransport(t, tollgate.Config{
			Limiter: lim, Costs: table(t), Buckets: buckets(100, window), LocalLimiter: local, LocalShare: 0.5,
			Policy: tollgate.Policies(tollgate.Policy{OnOutage: tollgate.FailLocal}, nil),
		})
		for range 3 { // sent, sent, then a wait for the third upload
			if _, err := send(t, tr, context.Background(), "POST", up.URL+"/v1/upload", nil); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		send(t, tr, ctx, "POST", up.URL+"/v1/upload", nil) // refused or cancelled while waiting
		cancel()
		tr.Close()
		tr.CloseIdleConnections()
	}
	rdb.Close()
	localRdb.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	waitNoTollgateGoroutines(t, before)
}

// TestNothingOutlivesABodyOrATransport: the goroutines that keep slots
// alive and wake their waiters end when the last body is closed, or the
// Transport is; a body left open holds its slot until then.
func TestNothingOutlivesABodyOrATransport(t *testing.T) {
	before := tollgateGoroutines()
	_, rc := realRedis(t)
	up := newUpstream(t)
	up.setRespond(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"usage":{"total_tokens":3}}`)) })
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{{Pattern: "GET /v1/chat", Endpoint: "chat", Charges: []costs.Charge{{Bucket: "pool", Units: 10}},
			Settle: []costs.Settle{{Bucket: "pool", Field: "usage.total_tokens"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tollgate.New(tollgate.Config{
		Limiter: limiterOn(t, rc), Costs: tab,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1000, time.Minute)}, MaxInFlight: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", up.URL+"/v1/chat", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b := open(), open() // both slots held by open bodies
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, err := send(t, tr, ctx, "GET", up.URL+"/v1/chat", nil); err == nil {
		t.Error("a third request got a slot while two bodies were open")
	}
	cancel()
	io.Copy(io.Discard, a.Body)
	a.Body.Close() // settles and frees a slot
	c := open()
	c.Body.Close()
	if err := tr.Close(); err != nil { // frees b's slot, though b is still open
		t.Fatal(err)
	}
	n, err := rc.ZCard(context.Background(), "tollgate:{default}:pool:slots").Result()
	if err != nil || n != 0 {
		t.Errorf("%d slots still held after Close (err %v), want 0", n, err)
	}
	b.Body.Close()
	tr.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	waitNoTollgateGoroutines(t, before)
}

// goroutineID returns the number of the goroutine that calls it, from the
// first line of its own stack ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// allStacks returns the stack of every goroutine, by number.
func allStacks() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := make(map[string]string)
	for _, g := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		out[id] = g
	}
	return out
}

// TestLeakFilterSeesTheEngine: the leak tests count a goroutine left
// parked in the engine (quota.(*Limiter).Wait, started by this test) and
// do not count the goroutine a test helper keeps (redistest's cmd.Wait of
// its redis-server), whatever the directory the repository is in.
func TestLeakFilterSeesTheEngine(t *testing.T) {
	srv, rc := realRedis(t)
	lim := limiterOn(t, rc)
	hour := quota.Demand{Bucket: "b", Units: 1, Limits: []quota.Limit{quota.PerWindow(1, time.Hour)}}
	if _, err := lim.Wait(context.Background(), "leak", hour); err != nil { // the hour's only unit
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leaked := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		leaked <- goroutineID()
		_, err := lim.Wait(ctx, "leak", hour) // holds the next hour's unit, sleeps until then
		done <- err
	}()
	id := <-leaked
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the parked Wait returned %v, want context.Canceled", err)
		}
	}()

	var stack string
	for range 500 { // until it sleeps in the engine, its decision made
		if stack = allStacks()[id]; strings.Contains(stack, "quota.(*Reservation).Wait") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(stack, "quota.(*Limiter).Wait") {
		t.Fatalf("goroutine %s never parked in quota.(*Limiter).Wait:\n%s", id, stack)
	}
	var helper string
	for gid, g := range allStacks() {
		if strings.Contains(g, "internal/redistest.") {
			helper = gid
		}
	}
	if helper == "" {
		t.Fatalf("no goroutine of redistest runs for the server on %s", srv.Addr)
	}
	seen := make(map[string]bool)
	for _, g := range tollgateStacks() {
		gid, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		seen[gid] = true
	}
	if !seen[id] {
		t.Errorf("the filter does not see goroutine %s, parked in the engine:\n%s", id, stack)
	}
	if seen[helper] {
		t.Errorf("the filter counts goroutine %s, redistest's own:\n%s", helper, allStacks()[helper])
	}
	if !t.Failed() {
		t.Logf("seen: goroutine %s in the engine; left out: goroutine %s of redistest", id, helper)
	}
}

// TestLeakFilterReadsFunctionsNotPaths: the filter decides by the
// functions a goroutine runs, the same in a clone named tollgate, in one
// named otherwise, and in a binary built with -trimpath.
func TestLeakFilterReadsFunctionsNotPaths(t *testing.T) {
	stacks := []struct {
		name  string
		own   bool
		stack string // "$" stands for the repository's directory
	}{
		{"parked in the engine", true, `goroutine 29 [select]:
github.com/tollgate/tollgate/quota.(*Reservation).Wait(0x32d00aa3e000, {0xc7d740, 0x32d00aaec730})
	$/quota/reservation.go:213 +0x148
github.com/tollgate/tollgate/quota.(*Limiter).Wait(0x32d00aafe700, {0xc7d740, 0x32d00aaec730}, {0xbc3f46, 0x4}, {0x32d00ab9d0e0, 0x1, 0x1})
	$/quota/quota.go:196 +0xd5
github.com/tollgate/tollgate_test.TestLeakFilterSeesTheEngine.func1()
	$/leak_test.go:270 +0x111
created by github.com/tollgate/tollgate_test.TestLeakFilterSeesTheEngine in goroutine 21
	$/leak_test.go:268 +0x3b6`},
		{"a method of the root package, under the standard library", true, `goroutine 40 [chan receive]:
time.Sleep(0x3b9aca00)
	/usr/local/go/src/runtime/time.go:363 +0x165
github.com/tollgate/tollgate.(*Transport).watch(...)
	$/lease.go:80
created by github.com/tollgate/tollgate.New in goroutine 1
	$/transport.go:300 +0x1d`},
		{"an in-process Redis", true, `goroutine 12 [IO wait]:
net.(*TCPListener).Accept(0xc000130000)
	/usr/local/go/src/net/tcpsock.go:380 +0x30
github.com/alicebob/miniredis/v2/server.(*Server).serve(0xc0001c6000, {0xc7e0a0, 0xc000130000})
	/root/go/pkg/mod/github.com/alicebob/miniredis/v2@v2.40.0/server/server.go:100 +0x3c
created by github.com/alicebob/miniredis/v2/server.NewServerTLS in goroutine 11
	/root/go/pkg/mod/github.com/alicebob/miniredis/v2@v2.40.0/server/server.go:80 +0x1c5`},
		{"redistest's cmd.Wait", false, `goroutine 22 [syscall]:
os/exec.(*Cmd).Wait(0x32d00aadf040)
	/usr/local/go/src/os/exec/exec.go:930 +0x45
github.com/tollgate/tollgate/internal/redistest.(*Server).run.func1()
	$/internal/redistest/redistest.go:154 +0x25
created by github.com/tollgate/tollgate/internal/redistest.(*Server).run in goroutine 21
	$/internal/redistest/redistest.go:153 +0x105`},
		{"a simulator's handler", false, `goroutine 50 [IO wait]:
net/http.(*conn).serve(0xc0002a2000, {0xc7e0a0, 0xc000130000})
	/usr/local/go/src/net/http/server.go:2000 +0x5f4
github.com/tollgate/tollgate/internal/ghsim.(*Server).handle(0xc000100000)
	$/internal/ghsim/server.go:10 +0x25
created by net/http.(*Server).Serve in goroutine 49
	/usr/local/go/src/net/http/server.go:3000 +0x485`},
		{"the test clock and the window check", false, `goroutine 51 [sync.Mutex.Lock]:
github.com/tollgate/tollgate/internal/testclock.(*Clock).Now(0xc000100000)
	$/internal/testclock/testclock.go:30 +0x25
github.com/tollgate/tollgate/internal/windowcheck.Most({0xc000100000, 0x1, 0x1}, 0x3b9aca00)
	$/internal/windowcheck/windowcheck.go:30 +0x25
created by github.com/tollgate/tollgate_test.TestX in goroutine 49
	$/x_test.go:3 +0x485`},
		{"a test's own goroutine", false, `goroutine 60 [sleep]:
time.Sleep(0x3b9aca00)
	/usr/local/go/src/runtime/time.go:363 +0x165
github.com/tollgate/tollgate_test.startWorkers.func1()
	$/faults_test.go:50 +0x25
created by github.com/tollgate/tollgate_test.startWorkers in goroutine 49
	$/faults_test.go:40 +0x485`},
		{"a _test.go file of the package itself", false, `goroutine 61 [sleep]:
github.com/tollgate/tollgate.helperOfAnInternalTest()
	$/export_test.go:50 +0x25
created by testing.(*T).Run in goroutine 1
	/usr/local/go/src/testing/testing.go:1997 +0x465`},
		{"created by tollgate, running others' code only", false, `goroutine 62 [select]:
net/http.(*persistConn).writeLoop(0xc000200000)
	/usr/local/go/src/net/http/transport.go:2600 +0xe5
created by github.com/tollgate/tollgate.(*Transport).RoundTrip in goroutine 61
	$/transport.go:400 +0x1a5`},
		{"a module whose path begins alike", false, `goroutine 63 [sleep]:
github.com/tollgate/tollgatex/quota.(*Limiter).Wait(0xc000100000)
	/src/tollgatex/quota/quota.go:1 +0x25
created by main.main in goroutine 1
	/src/tollgatex/main.go:1 +0x25`},
	}
	for _, dir := range []string{"/home/u/src/tollgate", "/tmp/y/tg", "/work/tollgate_test", "/build/tollgate/tollgate", "github.com/tollgate/tollgate"} {
		var dump []string
		want := make(map[string]string) // first line -> case
		for _, s := range stacks {
			g := strings.ReplaceAll(s.stack, "$", dir)
			dump = append(dump, g)
			if s.own {
				want[strings.SplitN(g, "\n", 2)[0]] = s.name
			}
		}
		got := ownStacks(strings.Join(dump, "\n\n") + "\n")
		seen := make(map[string]bool)
		for _, g := range got {
			head := strings.SplitN(g, "\n", 2)[0]
			seen[head] = true
			if _, ok := want[head]; !ok {
				t.Errorf("in %s: counted as tollgate's:\n%s", dir, g)
			}
		}
		for head, name := range want {
			if !seen[head] {
				t.Errorf("in %s: %s (%s) not counted", dir, name, head)
			}
		}
	}
}
