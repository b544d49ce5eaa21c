package quota

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// go-redis's own log lines (a failed dial) go to slog's default logger at
// the debug level: shown by a program that logs debug lines, hidden
// otherwise, and never written to stderr on their own.
func TestGoRedisLogGoesThroughSlog(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	dial := func(level slog.Level) string {
		t.Helper()
		var buf lockedBuffer // a goroutine of an earlier test may log through go-redis too
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		if err := c.Ping(context.Background()).Err(); err == nil {
			t.Fatal("a Redis answered on 127.0.0.1:1")
		}
		return buf.String()
	}
	if got := dial(slog.LevelDebug); !strings.Contains(got, "failed to dial") || !strings.Contains(got, "logger=go-redis") || !strings.Contains(got, "level=DEBUG") {
		t.Errorf("with debug lines on, slog got %q; want go-redis's failed dial at the debug level", got)
	}
	if got := dial(slog.LevelInfo); got != "" {
		t.Errorf("with debug lines off, slog got %q; want nothing", got)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
