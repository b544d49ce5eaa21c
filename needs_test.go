package tollgate_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/redistest"
)

// lockedBuffer is a log's output, written by the check's goroutine.
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

// TestTransportWarnsOfARedisThatLosesCounts: a Transport on a Redis that
// evicts keys (maxmemory-policy allkeys-lru), or keeps no append-only file,
// logs one Warn line for each, once, naming the setting; on a Redis that
// keeps everything, or for a user whose ACL denies INFO, it logs none.
func TestTransportWarnsOfARedisThatLosesCounts(t *testing.T) {
	evicting := redistest.Start(t, "--maxmemory-policy", "allkeys-lru", "--appendonly", "yes")
	keepsNothing := redistest.Start(t)
	good := redistest.Start(t, "--appendonly", "yes")
	denied := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	denied.SetUser(t, "tollgate", "reset", "on", ">pw", "~tollgate:*", "&tollgate:*", "+evalsha", "+eval", "+ping", "+time",
		"+subscribe", "+unsubscribe", "+publish", "+get", "+set", "+del", "+pexpire", "+zadd", "+zrange", "+mget")
	cases := []struct {
		name   string
		client redis.UniversalClient
		want   []string
	}{
		{"allkeys-lru", evicting.Client(t), []string{`level=WARN msg="tollgate: the Redis evicts keys under memory pressure (maxmemory-policy allkeys-lru): it may drop a window's count and admit past the limit; set maxmemory-policy noeviction"`}},
		{"no persistence", keepsNothing.Client(t), []string{`level=WARN msg="tollgate: the Redis has appendonly no: a restart forgets what it counted since its last snapshot (everything, without snapshots) and admits it again; set appendonly yes"`}},
		{"appendonly, noeviction", good.Client(t), nil},
		{"INFO denied", denied.UserClient(t, "tollgate", "pw"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out lockedBuffer
			logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
				Level: slog.LevelWarn,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			tr, err := tollgate.New(tollgate.Config{Limiter: limiterOn(t, c.client), Costs: table(t), Buckets: buckets(1000, time.Hour), Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			tollgate.NeedsChecked(tr)
			tr.Close()
			var got []string
			if s := strings.TrimSpace(out.String()); s != "" {
				got = strings.Split(s, "\n")
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
