package redistest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modulePath is the module whose directory ModuleRoot finds.
const modulePath = "github.com/tollgate/tollgate"

// ModuleRoot returns the directory of tollgate's module (its go.mod), the
// nearest above the working directory, which go test makes the package's
// own: the nested modules' tests (bench/, clienttest/) find it too. It
// reads neither the directory's name nor the paths compiled into the test
// binary, so that tests run alike in a clone of any name and under
// -trimpath.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	for {
		if declares(filepath.Join(dir, "go.mod"), modulePath) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			tb.Fatalf("redistest: no go.mod of module %s in the working directory or above it", modulePath)
		}
		dir = up
	}
}

// declares reports whether the go.mod file at path declares module mod.
func declares(path, mod string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(name), `"`) == mod
		}
	}
	return false
}
