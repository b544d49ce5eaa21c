package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// MainThreadCPU reads the CPU time, in µs, that the main thread of the
// Redis server rdb talks to has used so far (INFO cpu: user and system):
// reading requests, running commands, writing replies. Unlike the
// commands' own times it does not count the moments the thread waited for
// a core, so the change over a run, divided by its requests, holds steady
// on a shared machine: the figure benchmarks quote as Redis's CPU per
// request.
func MainThreadCPU(tb testing.TB, rdb redis.Cmdable) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("INFO cpu: %s", line)
			}
			total += f * 1e6
		}
	}
	return total
}
