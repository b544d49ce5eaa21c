package redistest

import (
	"context"
	"testing"
	"time"
)

// TestSentinelPromotesTheReplica: with the master killed, the sentinels
// promote its replica within a few seconds, and a failover client made
// from the set's URL writes to the new master.
func TestSentinelPromotesTheReplica(t *testing.T) {
	set := StartSentinel(t, 1, Options{Password: "s3cret"})
	c := set.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := set.MasterAddr(t); got != set.Master.Addr {
		t.Fatalf("the sentinels name %s, want the master %s", got, set.Master.Addr)
	}
	set.Master.WaitOnline(t, set.Replicas[0])
	start := time.Now()
	set.Master.Kill()
	promoted := set.WaitPromoted(t, set.Master.Addr)
	t.Logf("%s promoted %v after the kill", promoted.Addr, time.Since(start).Round(10*time.Millisecond))
	if promoted != set.Replicas[0] {
		t.Errorf("promoted %s, want the replica %s", promoted.Addr, set.Replicas[0].Addr)
	}
	var err error
	for range 100 {
		if err = c.Set(ctx, "k", "after", 0).Err(); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the failover client cannot write after the promotion: %v", err)
	}
	if got, err := promoted.Client(t).Get(ctx, "k").Result(); got != "after" {
		t.Errorf("the new master reads %q (%v), want the write made after the failover", got, err)
	}
}
