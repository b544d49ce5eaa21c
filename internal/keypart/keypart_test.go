package keypart

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"default", "default"},
		{"cred-0123abcd", "cred-0123abcd"},
		{"a.b_c-d/e", "a.b_c-d/e"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		// sha256("") and sha256("a b"), first 16 bytes.
		{"", "#e3b0c44298fc1c149afbf4c8996fb924"},
		{"a b", "#c8687a08aa5d6ed2044328fa6a697ab8"},
	} {
		if got := Of(tc.in); got != tc.want {
			t.Errorf("Of(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"{x}", "a:b", "a b", "é", strings.Repeat("a", 65), "#hash"} {
		got := Of(in)
		if !strings.HasPrefix(got, "#") || len(got) != 33 || strings.ContainsAny(got[1:], "{}:# ") {
			t.Errorf("Of(%q) = %q, want '#' and 32 hex digits", in, got)
		}
	}
}
