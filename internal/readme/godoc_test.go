package readme

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// packageDoc returns the package comment of the package in dir, relative
// to the module.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root(t), dir), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for _, p := range pkgs {
		for _, f := range p.Files {
			if f.Doc != nil {
				doc.WriteString(f.Doc.Text())
			}
		}
	}
	return doc.String()
}

// TestPackageDocsAreCurrent: what go doc tells a user stays true. Every
// package doc that lists the providers lists all five; the quota
// package's doc gives the Redis format this version writes; the root
// package's doc is for users: the tour of its files is docs/design.md's.
func TestPackageDocsAreCurrent(t *testing.T) {
	providers := []string{"youtube", "github", "openai", "gemini", "anthropic"}
	for _, dir := range []string{".", "quota", "costs", "providers/youtube", "providers/github", "providers/openai"} {
		doc := packageDoc(t, dir)
		for _, p := range providers {
			if strings.HasSuffix(dir, "/"+p) {
				continue // a provider does not name itself among the others
			}
			if !strings.Contains(doc, "providers/"+p) && !strings.Contains(doc, p+".Table") && !strings.Contains(doc, p+".Classic") {
				t.Errorf("go doc ./%s lists the providers without providers/%s", dir, p)
			}
		}
	}

	keys, err := os.ReadFile(filepath.Join(root(t), "quota", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const format = (\d+)$`).FindSubmatch(keys)
	if m == nil {
		t.Fatal("quota/keys.go declares no `const format = N`")
	}
	if doc, want := packageDoc(t, "quota"), "a format number, "+string(m[1])+" for this version"; !strings.Contains(doc, want) {
		t.Errorf("go doc ./quota does not say %q", want)
	}

	if files := regexp.MustCompile(`\b[a-z]+\.go\b`).FindAllString(packageDoc(t, "."), -1); len(files) > 0 {
		t.Errorf("the root package's doc names source files %q: the maintainers' tour belongs in docs/design.md", files)
	}
}
