package quota

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// See "go-redis's log" in the package documentation.
func init() {
	redis.SetLogger(goRedisLog{})
}

// goRedisLog hands go-redis's log lines to slog's default logger, at the
// debug level.
type goRedisLog struct{}

func (goRedisLog) Printf(ctx context.Context, format string, args ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l := slog.Default()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.Log(ctx, slog.LevelDebug, fmt.Sprintf(format, args...), slog.String("logger", "go-redis"))
}
