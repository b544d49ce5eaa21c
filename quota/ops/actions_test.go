package ops_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestActions: what Record keeps, Actions reads back newest first, to the
// millisecond; the list keeps the newest 1000 and expires 30 days after
// the newest; entries it cannot read are left out.
func TestActions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := redistest.Start(t)
	c := s.Client(t)
	lim, err := quota.New(c, quota.WithPrefix("ops:"))
	if err != nil {
		t.Fatal(err)
	}
	op := ops.New(lim)
	if got, err := op.Actions(ctx, 10); err != nil || got != nil {
		t.Fatalf("Actions of an empty record: %+v, %v; want none", got, err)
	}

	at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)
	first := ops.Action{At: at, By: "alice", Via: "cli", What: "pause", Scope: "project-a", Bucket: "search", For: 30 * time.Minute, Why: "deploy rollback"}
	second := ops.Action{At: at.Add(time.Minute), By: "bob", Via: "web 127.0.0.1:53412", What: "spend", Scope: "project-a", Bucket: "pool", Units: 200}
	for _, a := range []ops.Action{first, second} {
		if err := op.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := op.Actions(ctx, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("Actions: %+v, %v; want two", got, err)
	}
	first.At = first.At.Truncate(time.Millisecond)
	second.At = second.At.Truncate(time.Millisecond)
	if got[0] != second || got[1] != first {
		t.Errorf("Actions:\n%+v\n%+v\nwant newest first:\n%+v\n%+v", got[0], got[1], second, first)
	}
	raw, err := c.LIndex(ctx, "ops:actions", 0).Result()
	if err != nil || raw != `{"v":1,"at":1795694400123,"by":"alice","via":"cli","what":"pause","scope":"project-a","bucket":"search","for":1800000,"why":"deploy rollback"}` {
		t.Errorf("the entry as stored: %s, %v", raw, err)
	}
	if ttl, err := c.PTTL(ctx, "ops:actions").Result(); err != nil || ttl < 30*24*time.Hour-time.Minute || ttl > 30*24*time.Hour {
		t.Errorf("the record's TTL: %v, %v; want 30 days", ttl, err)
	}
	// Quota's survey does not take the record for a scope.
	if scopes, err := op.Survey(ctx, ""); err != nil || len(scopes) != 0 {
		t.Errorf("Survey with only the record in Redis: %+v, %v; want nothing", scopes, err)
	}

	// Entries this version cannot read are left out.
	c.RPush(ctx, "ops:actions", "not json", `{"v":2,"at":1795694400000,"by":"carol","what":"drain","scope":"x"}`, `{"v":1,"at":0,"by":"x","what":"pause","scope":"x"}`)
	if got, err := op.Actions(ctx, 0); err != nil || len(got) != 2 || got[0] != second {
		t.Errorf("Actions among unreadable entries: %+v, %v; want the two readable", got, err)
	}

	// The cap: the newest 1000 stay.
	pipe := c.Pipeline()
	for i := range 1100 {
		pipe.RPush(ctx, "ops:actions", fmt.Sprintf(`{"v":1,"at":%d,"by":"filler","what":"resume","scope":"s%d"}`, 1795694400000+int64(i), i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	last := ops.Action{At: at.Add(time.Hour).Truncate(time.Millisecond), By: "dave", Via: "cli", What: "resume", Scope: "project-b"}
	if err := op.Record(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n, err := c.LLen(ctx, "ops:actions").Result(); err != nil || n != 1000 {
		t.Errorf("the record holds %d entries (%v); want 1000", n, err)
	}
	got, err = op.Actions(ctx, 3)
	if err != nil || len(got) != 3 || got[0] != last || got[1].Scope != "s1099" || got[2].Scope != "s1098" {
		t.Errorf("Actions(3): %+v, %v; want the newest three", got, err)
	}
	if all, err := op.Actions(ctx, 0); err != nil || len(all) != 1000 || all[999].Scope != "s101" {
		t.Errorf("Actions(0): %d, %v; want the 1000 kept, the oldest s101 (5 entries before the 1100 fillers, 1 after)", len(all), err)
	}
}

// TestRecordRefuses: an action Record cannot keep as it is is an error
// matching quota.ErrInvalid, and nothing is written.
func TestRecordRefuses(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := s.Client(t)
	lim, err := quota.New(c)
	if err != nil {
		t.Fatal(err)
	}
	op := ops.New(lim)
	ok := ops.Action{By: "alice", What: "pause", Scope: "s", For: time.Minute, Why: "why"}
	for _, tc := range []struct {
		name   string
		change func(*ops.Action)
	}{
		{"no one", func(a *ops.Action) { a.By = "" }},
		{"blank by", func(a *ops.Action) { a.By = "  " }},
		{"by too long", func(a *ops.Action) { a.By = strings.Repeat("a", ops.MaxBy+1) }},
		{"by with a newline", func(a *ops.Action) { a.By = "alice\nroot" }},
		{"by with an escape", func(a *ops.Action) { a.By = "alice\x1b[2J" }},
		{"by not UTF-8", func(a *ops.Action) { a.By = "al\xffice" }},
		{"nothing done", func(a *ops.Action) { a.What = "" }},
		{"no scope", func(a *ops.Action) { a.Scope = "" }},
		{"reason too long", func(a *ops.Action) { a.Why = strings.Repeat("r", 201) }},
		{"reason with a tab", func(a *ops.Action) { a.Why = "a\tb" }},
		{"bucket too long", func(a *ops.Action) { a.Bucket = strings.Repeat("b", 257) }},
		{"negative length", func(a *ops.Action) { a.For = -time.Second }},
	} {
		a := ok
		tc.change(&a)
		if err := op.Record(ctx, a); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%s: %v, want an error matching quota.ErrInvalid", tc.name, err)
		}
	}
	if n, err := c.Exists(ctx, quota.DefaultPrefix+"actions").Result(); err != nil || n != 0 {
		t.Errorf("refused actions wrote the record (%d, %v)", n, err)
	}
	if err := op.Record(ctx, ok); err != nil {
		t.Errorf("the action as it should be: %v", err)
	}
	if got, err := op.Actions(ctx, 1); err != nil || len(got) != 1 || got[0].At.IsZero() || time.Since(got[0].At) > time.Minute {
		t.Errorf("an action with no instant: %+v, %v; want it recorded at now", got, err)
	}
}
