package tollgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
	spendrec "github.com/tollgate/tollgate/internal/spend"
	"github.com/tollgate/tollgate/quota"
)

// spendChildEnv carries a spending process's configuration (JSON); its
// presence makes the test binary that process (see TestMain).
const spendChildEnv = "TOLLGATE_SPEND_CHILD"

// spendChildConfig is what a spending process is told.
type spendChildConfig struct {
	Redis, Upstream, Name string
	Requests              int
}

// spendChild is a process that spends: it sends its requests through a
// Transport named cfg.Name, writes what it spent, and exits without
// closing the Transport, so that its record stays for the parent to read
// (a closed Transport removes its own).
func spendChild(raw string) int {
	var cfg spendChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "spend child:", err)
		return 3
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	table, err := loadTable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "spend child:", err)
		return 3
	}
	lim, err := quota.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spend child:", err)
		return 3
	}
	tr, err := tollgate.New(tollgate.Config{
		Name: cfg.Name, Limiter: lim, Costs: table, Scope: tollgate.Scope("fleet"),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1000, time.Hour)}}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "spend child:", err)
		return 3
	}
	client := &http.Client{Transport: tr}
	for range cfg.Requests {
		resp, err := client.Get(cfg.Upstream + "/cheap")
		if err != nil {
			fmt.Fprintln(os.Stderr, "spend child:", err)
			return 1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := tollgate.FlushSpending(tr, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "spend child: writing what it spent:", err)
		return 1
	}
	return 0
}

// TestWhoSpendsAcrossProcesses: two processes spend one scope; each
// writes what it spent under its own name, and a reader finds both, with
// their units.
func TestWhoSpendsAcrossProcesses(t *testing.T) {
	s := redistest.Start(t)
	var arrived atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { arrived.Add(1) }))
	defer up.Close()
	spends := map[string]int{"fleet-a": 5, "fleet-b": 3}
	for name, n := range spends {
		raw, _ := json.Marshal(spendChildConfig{Redis: s.Addr, Upstream: up.URL, Name: name, Requests: n})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), spendChildEnv+"="+string(raw))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("process %s: %v\n%s", name, err, out.String())
		}
	}
	if got := arrived.Load(); got != 8 {
		t.Fatalf("the upstream received %d requests, want 8", got)
	}
	reports, err := spendrec.Read(context.Background(), s.Client(t), "", "fleet", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range reports {
		for _, e := range r.Spent {
			if e.Bucket != "pool" || e.Endpoint != "cheap" {
				t.Errorf("process %s spent %d in bucket %q, endpoint %q; want pool, cheap", r.Process, e.Units, e.Bucket, e.Endpoint)
			}
			got[r.Process] += e.Units
		}
	}
	if len(got) != 2 || got["fleet-a"] != 5 || got["fleet-b"] != 3 {
		t.Errorf("the reports say %v; want fleet-a 5, fleet-b 3", got)
	}
	sum := spendrec.Summarize(reports)
	if len(sum) != 1 || sum[0].Units != 8 || len(sum[0].Spenders) != 2 || sum[0].Spenders[0].Process != "fleet-a" {
		t.Errorf("the summary is %+v; want 8 units of pool, fleet-a first", sum)
	}
}
