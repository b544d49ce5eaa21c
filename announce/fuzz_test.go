package announce_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/announce"
)

// maxShift bounds how far from now a fuzzed instant may be: a century.
const maxShift = 100 * 365 * 24 * 3600

// FuzzRead reads arbitrary headers, written as "Name: value" lines, at an
// instant shifted from now by a number of seconds. Read must not panic,
// must return at most 32 quotas, each consistent, the same twice over,
// and must allocate a bounded amount whatever the input.
//
//	go test ./announce -run '^$' -fuzz FuzzRead -fuzztime 50000x
//
// Its seeds in testdata/fuzz/FuzzRead are the table cases (kept in step by
// TestFuzzCorpus) and what fuzzing found worth keeping.
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string, shift int64) {
		h := http.Header{}
		for line := range strings.SplitSeq(raw, "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok {
				h.Add(name, value)
			}
		}
		at := now.Add(time.Duration(shift%maxShift) * time.Second)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := announce.Read(h, at)
		runtime.ReadMemStats(&after)
		if b := after.TotalAlloc - before.TotalAlloc; b > 256<<10 {
			t.Errorf("Read allocated %d bytes, want at most 256 KiB", b)
		}

		if len(got) > 32 {
			t.Errorf("Read returned %d quotas, want at most 32", len(got))
		}
		seen := map[string]bool{}
		for _, q := range got {
			if err := consistent(q, at); err != nil {
				t.Errorf("quota %+v: %v", q, err)
			}
			if id := q.Dialect + "/" + q.Name; seen[id] {
				t.Errorf("quota %s returned twice", id)
			} else {
				seen[id] = true
			}
		}
		if again := announce.Read(h, at); !reflect.DeepEqual(again, got) {
			t.Errorf("Read is not deterministic: got %+v, then %+v", got, again)
		}

		for _, v := range h["Retry-After"] {
			if d, ok := announce.RetryAfter(v, at); ok && (d < 0 || d > 365*24*time.Hour) {
				t.Errorf("RetryAfter(%q) = %v, true; want a duration within a year", v, d)
			}
		}
	})
}

// consistent reports what is wrong with a quota read at at. The drafts and
// the vendors do not promise Remaining <= Limit (the IETF draft's r is the
// "available quota", which a burst may raise), so that is not checked.
func consistent(q announce.Quota, at time.Time) error {
	switch q.Dialect {
	case "ratelimit", "ratelimit-trio", "github", "x", "openai", "anthropic":
	default:
		return fmt.Errorf("unknown dialect %q", q.Dialect)
	}
	for name, n := range map[string]int64{"Limit": q.Limit, "Remaining": q.Remaining, "Used": q.Used} {
		if n < -1 || n > 1<<53 {
			return fmt.Errorf("%s is %d, want -1 or 0 to 2^53", name, n)
		}
	}
	switch {
	case q.Name == "":
		return fmt.Errorf("no name")
	case q.Unit == "":
		return fmt.Errorf("no unit")
	case q.Limit < 0 && q.Remaining < 0:
		return fmt.Errorf("neither Limit nor Remaining announced")
	case !q.Reset.IsZero() && (q.Reset.Before(at) || q.Reset.After(at.Add(365*24*time.Hour))):
		return fmt.Errorf("Reset %v is not within a year from %v", q.Reset, at)
	case q.Window < 0 || q.Window > 365*24*time.Hour:
		return fmt.Errorf("Window %v is not within a year", q.Window)
	}
	return nil
}

var updateCorpus = flag.Bool("update-corpus", false, "write the table cases into testdata/fuzz/FuzzRead")

// TestFuzzCorpus: every table case is a seed of FuzzRead, as a file in
// testdata/fuzz/FuzzRead named after it; -update-corpus writes them.
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	for _, c := range append(append([]readCase(nil), sampleCases...), ruleCases...) {
		var shift int64
		if !c.at.IsZero() {
			shift = int64(c.at.Sub(now) / time.Second)
		}
		want := fmt.Sprintf("go test fuzz v1\nstring(%s)\nint64(%d)\n", strconv.Quote(strings.Join(c.lines, "\n")), shift)
		name := filepath.Join(dir, strings.ReplaceAll(c.name, "/", "-"))
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != want {
			t.Errorf("%s is %q, %v; want %q (go test -run TestFuzzCorpus -update-corpus)", name, got, err, want)
		}
	}
}
