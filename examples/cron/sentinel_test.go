package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
)

// TestSentinelURL: a run given a Sentinel URL in TOLLGATE_REDIS reads its
// pages through the master the sentinels name, and the master's replica
// has what it spent.
func TestSentinelURL(t *testing.T) {
	set := redistest.StartSentinel(t, 1, redistest.Options{})
	sim := ytsim.New(ytsim.Config{Quota: 600, Window: 10 * time.Second})
	api := httptest.NewServer(sim)
	defer api.Close()
	env := map[string]string{
		"TOLLGATE_REDIS": set.URL(), "YOUTUBE_API_KEY": "demo", "YOUTUBE_API": api.URL + "/youtube/v3",
		"YOUTUBE_QUOTA": "600", "YOUTUBE_WINDOW": "10s", "REGION": "GB",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("run: %v", err)
	}
	if st := sim.Stats()["demo"]; st.Units != 4 || st.QuotaErrors != 0 {
		t.Errorf("the upstream saw %+v, want 4 units and no quota error", st)
	}
	keys, err := set.Replicas[0].Client(t).Keys(ctx, "tollgate:*").Result()
	if err != nil || len(keys) == 0 {
		t.Errorf("the replica holds keys %v (%v), want the run's", keys, err)
	}
}
