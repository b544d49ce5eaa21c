package tollgate_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestInternalNeverImportsRoot: no package under internal/ depends on the
// root package, directly or through another, so that each mechanism of
// the request's path stays below it; internal/provider, which helps the
// providers assemble a Config, is the one exception.
func TestInternalNeverImportsRoot(t *testing.T) {
	const root = "github.com/tollgate/tollgate"
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", root+"/internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var listed []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, deps := fields[0], fields[1:]
		listed = append(listed, pkg)
		imports := slices.Contains(deps, root)
		switch {
		case pkg == root+"/internal/provider":
			// The exception, and the proof that the check sees the root.
			if !imports {
				t.Errorf("%s does not depend on the root: the check reads the dependencies wrong", pkg)
			}
		case imports:
			t.Errorf("%s depends on the root package", pkg)
		}
	}
	for _, want := range []string{"caps", "keypart", "keyscan", "learn", "lease", "meter", "notices", "outage", "remember", "provider", "spend"} {
		if !slices.Contains(listed, root+"/internal/"+want) {
			t.Errorf("go list did not list internal/%s; it listed %q", want, listed)
		}
	}
}
