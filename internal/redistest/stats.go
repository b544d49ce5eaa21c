package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Calls returns how many times the server ran each command since it
// started (INFO commandstats), by lower-case name, subcommands as
// "cluster|slots"; commands run by scripts count too.
func (s *Server) Calls(tb testing.TB) map[string]int64 {
	tb.Helper()
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		tb.Fatalf("redistest: INFO commandstats on %s: %v", s.Addr, err)
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for _, field := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}
