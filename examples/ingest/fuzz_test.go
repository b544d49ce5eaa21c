package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// FuzzParseFlags: any command line either parses into a usable
// configuration or fails with one line; it never panics.
//
//	go test ./examples/ingest -run '^$' -fuzz FuzzParseFlags -fuzztime 5m
func FuzzParseFlags(f *testing.F) {
	for _, args := range []string{
		"", "-quota\x00-5", "-table\x00classic\x00-policy\x00error", "-redis\x00redis://a:1,b:2",
		"-keys\x00K1,K2\x00-reserve\x00600", "-regions\x00us", "-window\x00-1s", "-api\x00::", "-h",
	} {
		f.Add(args)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		if joined == "" {
			args = nil
		}
		c, err := parseFlags(args, noEnv, io.Discard)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) && !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("parseFlags(%q) = %v: not a usage error", args, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseFlags(%q): error %q spans lines", args, err)
			}
			return
		}
		if c.quota <= 0 || c.reserve < 0 || c.reserve >= c.quota || len(c.regions) == 0 ||
			(c.table != "classic" && c.table != "granular") || (c.policy != "wait" && c.policy != "error") {
			t.Fatalf("parseFlags(%q) accepted an unusable configuration: %+v", args, c)
		}
	})
}
