package quota

import (
	"strings"
	"testing"
)

// FuzzKeyPart: any scope or bucket name, however hostile, gives a key part
// that cannot break the key's hash tag or run into another name's keys.
//
//	go test ./quota -run '^$' -fuzz FuzzKeyPart -fuzztime 5m
func FuzzKeyPart(f *testing.F) {
	for _, s := range []string{"project-a", "a{b}", "}{", "with space", "line\nbreak", "\xff", "#abc", "a:b", strings.Repeat("x", 65)} {
		f.Add(s, "pool")
	}
	l := &Limiter{prefix: DefaultPrefix}
	f.Fuzz(func(t *testing.T, scope, bucket string) {
		part := keyPart(scope)
		if strings.ContainsAny(part, "{}: \t\r\n") || len(part) > 65 || part == "" {
			t.Fatalf("keyPart(%q) = %q: not a safe key part", scope, part)
		}
		if (part == scope) == strings.HasPrefix(part, "#") {
			t.Fatalf("keyPart(%q) = %q: neither the name kept nor a hash", scope, part)
		}
		if keyPart(scope) != part {
			t.Fatal("keyPart is not deterministic")
		}
		sk := l.scopeKey(scope)
		if strings.Count(sk, "{") != 1 || strings.Count(sk, "}") != 1 {
			t.Fatalf("scope key %q has more than one hash tag", sk)
		}
		log, meta := windowKeys(sk, bucket, PerWindow(1, 1e9))
		if !strings.HasPrefix(log, sk) || !strings.HasPrefix(meta, sk) || strings.Count(log, "{") != 1 {
			t.Fatalf("bucket %q moved keys out of scope %q: %q", bucket, scope, log)
		}
		if other := keyPart(scope + "x"); other == part {
			t.Fatalf("%q and %q share a key part", scope, scope+"x")
		}
	})
}
