package redistest

import (
	"context"
	"testing"
)

// TestStartReplicaAcknowledgesAtOnce: once StartReplica returns, the
// replica acknowledges the master's first write as soon as a WAIT asks,
// not at its next periodic acknowledgement (up to a second later, which
// Redis 7 waits for after a diskless sync before it streams writes): what
// the tests of quota.WithReplicas depend on. The 200ms a WAIT allows here
// is the limit those tests give theirs.
func TestStartReplicaAcknowledgesAtOnce(t *testing.T) {
	master := Start(t)
	replica := master.StartReplica(t)
	c := master.Client(t)
	ctx := context.Background()
	pipe := c.Pipeline()
	pipe.Set(ctx, "first", "write", 0)
	wait := pipe.Do(ctx, "wait", 1, 200)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := wait.Int(); err != nil || n != 1 {
		t.Errorf("the first write reached %d replicas within 200ms (%v), want 1", n, err)
	}
	if got, err := replica.Client(t).Get(ctx, "first").Result(); got != "write" {
		t.Errorf("the replica reads %q (%v), want the write", got, err)
	}
}
