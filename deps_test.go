package tollgate_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCoreLinksNoEmulatedRedis: an importer of the core packages (the
// root, costs and quota) who never asks for an in-process Redis links
// neither miniredis nor its Lua interpreter: only quota/embedded does.
func TestCoreLinksNoEmulatedRedis(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "list", "-deps",
		"github.com/tollgate/tollgate",
		"github.com/tollgate/tollgate/costs",
		"github.com/tollgate/tollgate/quota",
	).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages, too few to be the core's: %q", len(deps), out)
	}
	for _, p := range deps {
		if strings.Contains(p, "alicebob/miniredis") || strings.Contains(p, "yuin/gopher-lua") {
			t.Errorf("the core links %s", p)
		}
	}
	// And the embedded Redis does link it: the check above can fail.
	out, err = exec.Command(goTool, "list", "-deps", "github.com/tollgate/tollgate/quota/embedded").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alicebob/miniredis") {
		t.Errorf("quota/embedded's dependencies (err %v) do not show miniredis:\n%s", err, out)
	}
}
