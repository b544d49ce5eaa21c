package quota

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testclock"
)

// A token bucket is a new kind of key, which processes of earlier
// versions never read: it needs no format bump. Their tools must skip it,
// or refuse it with ErrFormat, never misread it. The previous version's
// status is played here by what it ran: its scripts, format 3's parts
// without the buckets' (bucket*.lua are parts of their own, which the
// previous version did not have), and format 2's (testdata/format2), the
// release before; and its reading of descriptions and of key names,
// copied below as that version had them.

// noBucketUsage and noBucketReserve are the previous version's usage and decision
// scripts: this format's parts, the buckets' left out.
var (
	noBucketUsage   = redis.NewScript(clockPart + binaryPart + logPart + usagePart)
	noBucketReserve = redis.NewScript(binaryPart + nowPart + fastPart + readPausesPart + logPart + decidePart + reservePart)
)

// previousScript assembles a script of the previous version's parts.
func previousScript(t *testing.T, parts ...string) *redis.Script {
	t.Helper()
	var b strings.Builder
	for _, p := range parts {
		s, err := os.ReadFile("testdata/format2/" + p + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(s)
	}
	return redis.NewScript(b.String())
}

// previousDescription is the previous version's stored description (version
// 1), as it decoded one: fields it does not know are ignored by
// encoding/json.
type previousDescription struct {
	Version int     `json:"v"`
	Quotas  []int64 `json:"quotas,omitempty"`
	Limits  []struct {
		Units  int64  `json:"units"`
		Window int64  `json:"window_us,omitempty"`
		Zone   string `json:"zone,omitempty"`
		Fixed  bool   `json:"fixed,omitempty"`
		Name   string `json:"name,omitempty"`
	} `json:"limits"`
}

// previousRead reads a description as the previous version did: version 1
// only, at least one limit, a quota per limit or none; it returns the
// limits as it would have decided them.
func previousRead(v []byte) ([]Limit, []int64, error) {
	var s previousDescription
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, nil, err
	}
	if s.Version != 1 {
		return nil, nil, errors.New("version refused")
	}
	if len(s.Limits) == 0 {
		return nil, nil, errors.New("no limits")
	}
	if len(s.Quotas) != 0 && len(s.Quotas) != len(s.Limits) {
		return nil, nil, errors.New("one quota per limit, or none")
	}
	var out []Limit
	for _, l := range s.Limits {
		lim := Limit{Units: l.Units, Window: time.Duration(l.Window) * time.Microsecond, Fixed: l.Fixed, Name: l.Name}
		if l.Zone != "" {
			lim.Calendar, lim.Location = true, time.UTC
		}
		out = append(out, lim)
	}
	return out, s.Quotas, nil
}

// previousWindowKey is how the previous version's Survey told a window's
// keys among a bucket's: by their suffix.
func previousWindowKey(suffix string) bool {
	return strings.HasSuffix(suffix, ":log") || strings.HasSuffix(suffix, ":meta") || strings.HasSuffix(suffix, ":sum")
}

// TestBucketOlderStatusSkipsIt: the previous version's status, meeting a
// scope with token buckets beside windows, lists the windows only and
// reads them right; a description it cannot read without misreading (a
// bucket alone, or announced) it refuses; and its scripts, were they run
// on a bucket's key, refuse it with a FORMAT error.
func TestBucketOlderStatusSkipsIt(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client := srv.Client(t)
	clock := testclock.New(bucketStart)
	l := mustNew(t, client, WithClock(clock.Now))
	s := "older-status"
	rpm := TokenBucket(50, 50, time.Minute)
	hour := PerWindow(1000, time.Hour)
	if r := mustAllow(t, l, s, charge("mixed", 7, hour, rpm), charge("alone", 3, rpm)); !r.OK() {
		t.Fatal("refused")
	}
	err := l.Describe(ctx,
		Description{Scope: s, Bucket: "mixed", Limits: []Limit{hour, rpm}, Quotas: []int64{1100, 55}},
		Description{Scope: s, Bucket: "alone", Limits: []Limit{rpm}},
		Description{Scope: s, Bucket: "announced", Limits: []Limit{rpm, hour}, Announced: "anthropic/requests"},
	)
	if err != nil {
		t.Fatal(err)
	}

	// This version reads back what it wrote.
	for _, want := range []Description{
		{Scope: s, Bucket: "mixed", Limits: []Limit{hour, rpm}, Quotas: []int64{1100, 55}},
		{Scope: s, Bucket: "alone", Limits: []Limit{rpm}},
		{Scope: s, Bucket: "announced", Limits: []Limit{rpm, hour}, Announced: "anthropic/requests"},
	} {
		d, ok, err := l.description(ctx, s, want.Bucket)
		if err != nil || !ok {
			t.Fatalf("Description(%s): ok=%v err=%v", want.Bucket, ok, err)
		}
		if !slices.Equal(d.Limits, want.Limits) || !slices.Equal(d.Quotas, want.Quotas) {
			t.Errorf("Description(%s): limits %v quotas %v, want %v and %v", want.Bucket, d.Limits, d.Quotas, want.Limits, want.Quotas)
		}
	}

	// The previous version's Survey: the bucket's key is no window's.
	keys, err := client.Keys(ctx, "*{"+s+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var windows, buckets []string
	for _, k := range keys {
		_, rest, _ := strings.Cut(k, "}:")
		_, suffix, _ := strings.Cut(rest, ":")
		if previousWindowKey(suffix) {
			windows = append(windows, k)
		}
		if strings.HasSuffix(k, ":tat") {
			buckets = append(buckets, k)
		}
	}
	if len(buckets) != 2 {
		t.Fatalf("bucket keys %v, want the two buckets' (mixed and alone)", buckets)
	}
	for _, k := range windows {
		if !strings.Contains(k, ":w1h0m0s:") {
			t.Errorf("the previous version takes %s for a window's key", k)
		}
	}
	// And this version's Survey lists the buckets.
	stored, err := l.survey(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range stored {
		for _, b := range sc.Buckets {
			if b.Bucket == "alone" && !slices.Equal(b.Windows, []string{"r1m0s"}) {
				t.Errorf("Survey: bucket alone's windows %v, want [r1m0s]", b.Windows)
			}
		}
	}

	// Its reading of descriptions: the mixed bucket's window alone, with
	// its own quota; the others refused.
	raw := func(bucket string) []byte {
		v, err := client.Get(ctx, l.descriptionKey(s, bucket)).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	limits, quotas, err := previousRead(raw("mixed"))
	if err != nil {
		t.Fatalf("the previous version refuses the mixed bucket's description: %v", err)
	}
	if len(limits) != 1 || limits[0] != hour || !slices.Equal(quotas, []int64{1100}) {
		t.Errorf("the previous version reads limits %v quotas %v, want [%v] and [1100]", limits, quotas, hour)
	}
	for _, b := range []string{"alone", "announced"} {
		if limits, _, err := previousRead(raw(b)); err == nil {
			t.Errorf("the previous version reads bucket %s's description as %v, want a refusal", b, limits)
		}
	}
	// Its Usage of the window reads the same as this version's.
	w := l.window(s, "mixed", hour)
	old, err := noBucketUsage.Run(ctx, client,
		[]string{w.log, w.meta, w.pause, w.scopePause}, clock.Now().UnixMicro(), hour.Window.Microseconds()).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, s, "mixed", hour); old[1] != u.Used || u.Used != 7 {
		t.Errorf("the hour's used: previous version %d, this one %d, want 7", old[1], u.Used)
	}

	// Its scripts on a bucket's key, and format 2's: a FORMAT error
	// (ErrFormat), never a reading.
	b := l.window(s, "alone", rpm)
	at := clock.Now().UnixMicro()
	usages := map[string]*redis.Script{"format 3 without buckets": noBucketUsage, "format 2": previousScript(t, "clock", "log", "usage")}
	for name, script := range usages {
		err = script.Run(ctx, client, []string{b.log, b.meta, b.pause, b.scopePause}, at, rpm.Window.Microseconds()).Err()
		if err == nil || !errors.Is(redisError(ctx, "usage", err), ErrFormat) {
			t.Errorf("%s: usage on a bucket's key: %v, want a FORMAT error (ErrFormat)", name, err)
		}
	}
	// A decision's keys and arguments as each version sent them (the
	// bucket's span in place of a window's length).
	keys, args, _, err := l.decision(s, 0, []Demand{charge("alone", 1, rpm)}, false)
	if err != nil {
		t.Fatal(err)
	}
	args[len(args)-1] = rpm.Window.Microseconds()
	err = noBucketReserve.Run(ctx, client, keys, args...).Err()
	if err == nil || !errors.Is(redisError(ctx, "reserve", err), ErrFormat) {
		t.Errorf("format 3 without buckets: a decision on a bucket's key: %v, want a FORMAT error (ErrFormat)", err)
	}
	err = previousScript(t, "fast", "log", "decide", "reserve").Run(ctx, client,
		[]string{b.meta, b.pause, b.scopePause, b.log}, at, 0, "", 1, 49, rpm.Window.Microseconds()).Err()
	if err == nil || !errors.Is(redisError(ctx, "reserve", err), ErrFormat) {
		t.Errorf("format 2: a decision on a bucket's key: %v, want a FORMAT error (ErrFormat)", err)
	}
	if u := mustUsage(t, l, s, "alone", rpm); u.Used != 3 {
		t.Errorf("after the previous version's tries: used %d, want 3", u.Used)
	}
}
