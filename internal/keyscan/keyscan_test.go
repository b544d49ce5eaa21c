package keyscan

import "testing"

func TestGlob(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"tollgate:", "tollgate:"},
		{"a*b", `a\*b`},
		{`p?[x]\`, `p\?\[x\]\\`},
		{"名前", "名前"},
	} {
		if got := Glob(c.in); got != c.want {
			t.Errorf("Glob(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
