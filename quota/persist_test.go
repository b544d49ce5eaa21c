package quota

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestRestartKeepsWhatWasSpent restarts a redis-server mid-window. With
// appendonly it still counts what was spent before, so nothing is spent
// twice; without persistence the count is lost, which the README says.
func TestRestartKeepsWhatWasSpent(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantUsed int64
	}{
		{"appendonly", []string{"--appendonly", "yes", "--appendfsync", "always"}, 8},
		{"no persistence", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, c.args...)
			l := mustNew(t, srv.Client(t))
			lim := PerWindow(10, time.Hour)
			if r := mustAllow(t, l, "s", charge("pool", 8, lim)); !r.OK() {
				t.Fatal("refused")
			}
			srv.Restart(t) // SIGKILL, then the same port and directory
			l = mustNew(t, srv.Client(t))
			u, err := l.Usage(ctx, "s", "pool", lim)
			if err != nil {
				t.Fatal(err)
			}
			if u.Used != c.wantUsed {
				t.Errorf("after the restart: %d units counted, want %d", u.Used, c.wantUsed)
			}
			r := mustAllow(t, l, "s", charge("pool", 3, lim))
			if over := c.wantUsed+3 > 10; r.OK() == over {
				t.Errorf("3 more units after the restart: admitted=%v, want %v", r.OK(), !over)
			}
		})
	}
}
