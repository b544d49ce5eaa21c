package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		flag string // the one-line error must name it
	}{
		{[]string{"-quota", "-5"}, "-quota"},
		{[]string{"-quota", "0"}, "-quota"},
		{[]string{"-quota", "many"}, "-quota"},
		{[]string{"-table", "fancy"}, "-table"},
		{[]string{"-policy", "retry"}, "-policy"},
		{[]string{"-api", "://nope"}, "-api"},
		{[]string{"-api", "ftp://example.com/youtube/v3"}, "-api"},
		{[]string{"-redis", "http://localhost:6379"}, "-redis"},
		{[]string{"-redis", "not a url"}, "-redis"},
		{[]string{"-redis", "localhost:99999"}, "-redis"},
		{[]string{"-window", "-1s"}, "-window"},
		{[]string{"-window", "0s"}, "-window"}, // not the Pacific day in disguise
		{[]string{"-window", "0"}, "-window"},
		{[]string{"-keys", "K", "-api", "http://127.0.0.1:1/youtube/v3", "-window", "0s"}, "-window"},
		{[]string{"-window", "soon"}, "-window"},
		{[]string{"-duration", "-5m"}, "-duration"},
		{[]string{"-reserve", "-1"}, "-reserve"},
		{[]string{"-reserve", "600", "-quota", "600"}, "-reserve"},
		{[]string{"-regions", "usa"}, "-regions"},
		{[]string{"-regions", ","}, "-regions"},
		{[]string{"-search-quota", "0"}, "-search-quota"},
		{[]string{"-max-wait", "-1s"}, "-max-wait"},
		{[]string{"-pace", "1.5"}, "-pace"},
		{[]string{"-pace", "-0.1"}, "-pace"},
		{[]string{"-shares", "US=0"}, "-shares"},
		{[]string{"-shares", "XX=2"}, "-shares"},
		{[]string{"-shares", "US"}, "-shares"},
		{[]string{"-shares", ","}, "-shares"},
		{[]string{"-no-such-flag"}, "-no-such-flag"},
		{[]string{"stray"}, "stray"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr, noEnv)
		msg := stderr.String()
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, msg)
			continue
		}
		if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.flag) {
			t.Errorf("%v: stderr %q, want one line naming %s", c.args, msg, c.flag)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: wrote %q to stdout", c.args, stdout.String())
		}
	}
}

func TestFlagDefaults(t *testing.T) {
	c, err := parseFlags([]string{"-keys", "K1, K2"}, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.offline || len(c.keys) != 2 || c.quota != 10000 || c.reserve != 500 || c.window != 0 ||
		c.table != "granular" || c.policy != "wait" || len(c.regions) != 8 || c.api != defaultAPI {
		t.Errorf("defaults with keys: %+v", c)
	}
	// Keys from the environment; the quota scales down only offline.
	c, err = parseFlags(nil, func(k string) string {
		if k == "YOUTUBE_API_KEYS" {
			return "ENVKEY"
		}
		return ""
	}, nil)
	if err != nil || c.offline || c.keys[0] != "ENVKEY" {
		t.Errorf("keys from YOUTUBE_API_KEYS: %+v, %v", c, err)
	}
	c, err = parseFlags(nil, noEnv, nil)
	if err != nil || !c.offline || c.quota != offlineQuota || c.window != offlineWindow || c.reserve != 3 {
		t.Errorf("offline defaults: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-quota", "1000", "-window", "2s", "-reserve", "0"}, noEnv, nil)
	if err != nil || c.quota != 1000 || c.window != 2*time.Second || c.reserve != 0 {
		t.Errorf("flags win over the offline defaults: %+v, %v", c, err)
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &stderr, noEnv); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-policy") {
		t.Errorf("-h printed %q, want the flags", stderr.String())
	}
}

// -h says each flag's default once, in words that hold with -keys and
// offline alike: no "offline default 60 ... (default 10000)".
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &stderr, noEnv); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	blocks := map[string]string{} // flag name -> its lines
	name := ""
	for _, line := range strings.Split(stderr.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(rest, " ")
		}
		if name != "" {
			blocks[name] += line + "\n"
		}
	}
	for flagName, block := range blocks {
		if n := strings.Count(block, "default"); n > 1 {
			t.Errorf("-%s says %d defaults:\n%s", flagName, n, block)
		}
	}
	for flagName, want := range map[string][]string{
		"quota":        {"default 10000", "offline 60", "600 with -table classic"},
		"search-quota": {"default 100", "offline 4", "units"},
		"window":       {"Pacific day", "offline 10s"},
	} {
		for _, w := range want {
			if !strings.Contains(blocks[flagName], w) {
				t.Errorf("-%s's help lacks %q:\n%s", flagName, w, blocks[flagName])
			}
		}
	}
}

// TestSharesAndPaceFlags: -shares gives each region its weight and -pace
// the burst, on a fixed window that starts where the simulated API's
// windows do.
func TestSharesAndPaceFlags(t *testing.T) {
	c, err := parseFlags([]string{"-regions", "US,GB,DE", "-shares", "US=2", "-pace", "0.1"}, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.shares["US"] != 2 || c.shares["GB"] != 1 || c.shares["DE"] != 1 || len(c.shares) != 3 || c.pace != 0.1 {
		t.Fatalf("shares %v, pace %v; want US=2, GB=1, DE=1 and 0.1", c.shares, c.pace)
	}
	now := time.Date(2026, 7, 1, 10, 0, 3, 0, time.UTC)
	b := c.fairPool(now)
	lim := b.Limits[0]
	if !lim.Fixed || lim.Window != offlineWindow || !lim.Ends.Equal(time.Date(2026, 7, 1, 10, 0, 10, 0, time.UTC)) || b.Pace.Burst != 0.1 || b.Shares.Weights["US"] != 2 {
		t.Errorf("the pool: %+v, pace %+v, shares %+v; want a fixed 10s window ending 10:00:10, paced at 0.1, US weighing 2", lim, b.Pace, b.Shares)
	}
	if c, err := parseFlags([]string{"-shares", "equal"}, noEnv, nil); err != nil || len(c.shares) != 8 || c.pace >= 0 {
		t.Errorf("-shares equal: %v, %v; want the eight regions weighing 1 and no pace", c, err)
	}
	if c, err := parseFlags(nil, noEnv, nil); err != nil || c.fair() {
		t.Errorf("no -shares nor -pace: %v; want neither", err)
	}
}
