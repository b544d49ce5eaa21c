package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testclock"
)

// testBucketOtherFormatRefused: a token bucket's state that is not format
// 3's (another tag of the same length, or a state of another length) is
// refused with ErrFormat by an LLM call's decision and by its settlement,
// which bucketfast.lua and settlefast.lua read before the general code,
// and is left as it was.
func testBucketOtherFormatRefused(t *testing.T, b *backend) {
	ctx := context.Background()
	l := b.limiter(t, WithClock(testclock.New(bucketStart).Now))
	tpm := TokenBucket(10_000, 10_000, time.Minute)
	for _, c := range []struct{ name, state string }{
		{"another tag", "#4r:" + strings.Repeat("\x00", 40)},
		{"another length", "#3r:" + strings.Repeat("\x00", 48)},
	} {
		s := scope(t, c.name)
		llm := []Demand{charge("requests", 1, tpm), charge("input", 500, tpm), charge("output", 300, tpm)}
		r := mustAllow(t, l, s, llm...)
		if !r.OK() {
			t.Fatalf("%s: the first call refused", c.name)
		}
		key := l.window(s, "output", tpm).meta
		if err := b.client.Set(ctx, key, c.state, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.SettleAll(ctx, map[string]int64{"input": 400, "output": 100}); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: settlement: %v, want ErrFormat", c.name, err)
		}
		if _, err := l.Allow(ctx, s, llm...); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: decision: %v, want ErrFormat", c.name, err)
		}
		if v, err := b.client.Get(ctx, key).Result(); err != nil || v != c.state {
			t.Errorf("%s: the state became %x (%v), want it left as it was", c.name, v, err)
		}
	}
}
