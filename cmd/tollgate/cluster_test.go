package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// TestOnACluster: given a cluster's nodes as a comma-separated list, the
// command finds the scopes on every master (SCAN each), and a pause
// reaches a process listening on whichever node it subscribed to.
func TestOnACluster(t *testing.T) {
	c := redistest.StartClusterWith(t, 3, 0, redistest.Options{Args: keepsEverything})
	var urls []string
	for _, a := range c.Addrs {
		urls = append(urls, "redis://"+a)
	}
	url := strings.Join(urls, ",")
	e := upstreamOnly(t)
	client := c.Client(t)
	lim, err := quota.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tr := e.process(t, lim, nil)
	scopes := []string{"project-a", "project-b", "project-c", "project-d"}
	masters := map[string]bool{}
	for _, s := range scopes {
		n, err := client.MasterForKey(t.Context(), quota.DefaultPrefix+"{"+s+"}:")
		if err != nil {
			t.Fatal(err)
		}
		masters[n.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the scopes' keys live on %d master, want several for SCAN to visit", len(masters))
	}
	for _, s := range scopes {
		e.spend(t, tr, s, "/v1/items", 2)
	}
	described(t, lim, "pool", scopes...)

	code, out, errs := cmd(t, nil, "status", "-redis", url)
	if code != 0 || errs != "" || !strings.Contains(out, ": 4 scopes") || strings.Count(out, "2 / 9500") != 4 {
		t.Fatalf("status on the cluster: exit %d, stderr %q:\n%s", code, errs, out)
	}
	// A process listening, as one holding a lease does, hears the pause
	// on whichever node it subscribed to.
	ln, err := lim.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for n := range ln.Notices() {
			ln.Applied(t.Context(), n)
		}
	}()
	code, out, errs = cmd(t, nil, "pause", "-scope", "project-c", "-for", "1m", "-reason", "cluster drill", "-redis", url)
	if code != 0 || errs != "" || !strings.Contains(out, "the 1 process listening applied it") {
		t.Fatalf("pause on the cluster: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if p, err := lim.PauseOf(t.Context(), "project-c", ""); err != nil || p.Reason != "cluster drill" || p.Until.Before(time.Now().Add(50*time.Second)) {
		t.Errorf("the pause in Redis: %+v, %v", p, err)
	}
}
