package quota

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLeanFor checks which form of a script a call gets: the lean one
// (without the token buckets' code) when no argument is a bucket's span,
// the full one otherwise, and a script with no lean form as it is.
func TestLeanFor(t *testing.T) {
	l := &Limiter{prefix: DefaultPrefix}
	if lean[settleScript] == nil {
		t.Fatal("settleScript has no lean form")
	}
	bucket := l.window("s", "b", TokenBucket(10, 1, time.Second)).length
	window := l.window("s", "b", PerWindow(10, time.Minute)).length
	for _, c := range []struct {
		name string
		args []any
		full bool
	}{
		{"a window", []any{"", int64(0), "", int64(1), int64(9), window}, false},
		{"a calendar day's bounds", []any{"", int64(0), "", int64(1), int64(9), "1795000000000000,1795086400000000"}, false},
		{"a bucket", []any{"", int64(0), "", int64(1), int64(9), bucket}, true},
		{"a window and a bucket", []any{"", int64(0), "1,2", int64(1), int64(9), window, int64(1), int64(9), bucket}, true},
		{"another argument beginning r", []any{"r-id", int64(1), window}, true},
	} {
		got := leanFor(settleScript, c.args)
		if full := got == settleScript; full != c.full || (!full && got != lean[settleScript]) {
			t.Errorf("%s: leanFor gave the full form: %v, want %v", c.name, full, c.full)
		}
	}
	if leanFor(slotsScript, []any{"x"}) != slotsScript {
		t.Error("a script with no lean form was not sent as it is")
	}
	for full, windows := range lean {
		if strings.Contains(sourceOf(windows), "bucket_admit") || !strings.Contains(sourceOf(full), "bucket_admit") {
			t.Errorf("lean form %s holds the buckets' code, or its full form %s lacks it", windows.Hash(), full.Hash())
		}
	}
}

// sourceOf returns a script's Lua source.
func sourceOf(s interface{ Hash() string }) string {
	src, _ := sources.Load(s.Hash())
	str, _ := src.(string)
	return str
}

// testLeanRefusesBucket checks the lean scripts' own guard: sent a token
// bucket's span, which only the full scripts read, a lean script refuses
// it with an error rather than reading the bucket as a window.
func testLeanRefusesBucket(t *testing.T, b *backend) {
	ctx := context.Background()
	l := mustNew(t, b.client)
	w := l.window(scope(t, "s"), "b", TokenBucket(10, 1, time.Second))
	err := lean[settleScript].Run(ctx, b.client, []string{w.meta, w.log}, "", 1, 1, w.length).Err()
	if err == nil || !strings.Contains(err.Error(), "token bucket sent to a script without") {
		t.Fatalf("lean settle of a bucket: %v, want the guard's error", err)
	}
	if n, err := b.client.Exists(ctx, w.meta, w.log).Result(); err != nil || n != 0 {
		t.Fatalf("the refused call left %d keys (%v)", n, err)
	}
}
