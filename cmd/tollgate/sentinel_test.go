package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// TestOnSentinel: given a Sentinel URL (in -redis or TOLLGATE_REDIS), the
// commands reach the master the sentinels name. status shows what a
// process spent and an operator paused; the master is killed with
// SIGKILL, the sentinels promote a replica, and status shows the same
// after (the process's decisions and the pause waited for a replica);
// resume and spend work on the new master, and the process carries on. No output names a password, and every line
// that names the Redis names the master set and its sentinels.
func TestOnSentinel(t *testing.T) {
	const password = "sentinel-secret-7"
	set := redistest.StartSentinel(t, 2, redistest.Options{Password: password, Args: keepsEverything})
	url := set.URL()
	e := upstreamOnly(t)
	lim, err := quota.New(set.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := e.process(t, lim, nil)
	e.spend(t, tr, "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")

	check := func(when string, code int, out, errs string) {
		t.Helper()
		if code != 0 || errs != "" {
			t.Fatalf("%s: exit %d, stderr %q:\n%s", when, code, errs, out)
		}
		if strings.Contains(out+errs, password) {
			t.Errorf("%s: the output shows the password:\n%s%s", when, out, errs)
		}
	}
	// serve's redis field takes the URL too, and says where the quotas are.
	c := &cli{getenv: func(string) string { return "" }}
	rdb, where, err := c.gatewayRedis(url)
	if err != nil {
		t.Fatalf("serve's redis: %v", err)
	}
	rdb.Close()
	if !strings.HasPrefix(where, `Sentinel master set "tollgate" (sentinels 127.0.0.1:`) || strings.Contains(where, password) {
		t.Errorf("serve says its quotas are in %q", where)
	}

	code, before, errs := cmd(t, nil, "status", "-redis", url)
	check("status before the failover", code, before, errs)
	if !strings.Contains(before, "3 / 9500") {
		t.Errorf("status before the failover does not count the 3 units spent:\n%s", before)
	}
	code, out, errs := cmd(t, nil, "pause", "-scope", "project-a", "-bucket", "pool", "-for", "10m", "-reason", "failover drill", "-redis", url)
	check("pause", code, out, errs)

	set.Master.Kill()
	promoted := set.WaitPromoted(t, set.Master.Addr)
	t.Logf("%s promoted", promoted.Addr)

	var after string
	for range 50 { // the command's client finds the new master as it connects
		var c cli
		var o, eb bytes.Buffer
		c = cli{stdout: &o, stderr: &eb, getenv: func(k string) string {
			if k == "TOLLGATE_REDIS" {
				return url
			}
			return ""
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code = c.run(ctx, []string{"status"})
		cancel()
		after, errs = o.String(), eb.String()
		if code == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	check("status after the failover, from TOLLGATE_REDIS", code, after, errs)
	for _, want := range []string{"3 / 9500", "PAUSED", "failover drill"} {
		if !strings.Contains(after, want) {
			t.Errorf("status after the failover lacks %q: the promoted replica lost it:\n%s", want, after)
		}
	}
	code, out, errs = cmd(t, nil, "resume", "-scope", "project-a", "-redis", url)
	check("resume after the failover", code, out, errs)
	// The process carries on, on the promoted master.
	for i := 0; ; i++ {
		resp, err := e.get(tr, "project-a", "/v1/items")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			t.Fatalf("the process cannot spend after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errs = cmd(t, nil, "spend", "-scope", "project-a", "-bucket", "pool", "-units", "10", "-redis", url)
	check("spend after the failover", code, out, errs)
	code, out, errs = cmd(t, nil, "status", "-scope", "project-a", "-redis", url)
	check("status at the end", code, out, errs)
	if !strings.Contains(out, "14 / 9500") {
		t.Errorf("status at the end does not count 3 + 1 + 10 units:\n%s", out)
	}

	// An unreachable set is one line naming the master set and the
	// sentinels, without the password.
	code, out, errs = cmd(t, nil, "status", "-redis", "redis://:"+password+"@127.0.0.1:1?master_name=gone&password="+password)
	if code != 1 || strings.Contains(errs, password) || !strings.Contains(errs, `Sentinel master set "gone" (sentinels 127.0.0.1:1)`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("status on no sentinel: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestSentinelWithoutReplica: a master set with no replica is refused at
// start, in one line naming the setting that waits for one.
func TestSentinelWithoutReplica(t *testing.T) {
	set := redistest.StartSentinel(t, 0, redistest.Options{Args: keepsEverything})
	code, out, errs := cmd(t, nil, "status", "-redis", set.URL())
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "quota.WithReplicas") || !strings.Contains(errs, "give the master a replica") {
		t.Errorf("status on a master set without replica: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	t.Log(strings.TrimSpace(errs))
}
