package readme

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
)

// block is one fenced code block of the README or of a page of docs/.
type block struct {
	file string // the page, relative to the module: "README.md", "docs/youtube.md"
	lang string // the info string: "go", "sh"
	kind string // from the <!-- readme: kind --> comment above it
	line int    // the page's line of its first line of code
	code string
}

// at names the block's first line of code, as compile errors do.
func (b block) at() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// root is the module's directory, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// pages returns README.md and the pages of docs/, relative to the module.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("docs/ holds no pages")
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(filepath.Join("docs", filepath.Base(d))))
	}
	return out
}

// blocks reads the fenced code blocks of the README and of every page of
// docs/.
func blocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, page := range pages(t) {
		out = append(out, pageBlocks(t, page)...)
	}
	return out
}

// pageBlocks reads the fenced code blocks of one page.
func pageBlocks(t *testing.T, page string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root(t), filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kindRe := regexp.MustCompile(`^<!-- readme: ([a-z ]+) -->$`)
	var out []block
	var cur *block
	kind, n := "", 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{file: page, lang: strings.TrimPrefix(line, "```"), kind: kind, line: n + 1}
			kind = ""
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		case kindRe.MatchString(line):
			kind = kindRe.FindStringSubmatch(line)[1]
		case strings.TrimSpace(line) != "":
			kind = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: the code block opened at line %d never closes", page, cur.line-1)
	}
	return out
}

// goTool is the go command of the toolchain running the test.
func goTool() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// harnessImports are what fragments may use; each is used once by the
// harness, so that a fragment need not use them all.
const harnessImports = `import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/embedded"
)

var (
	_ = context.Background
	_ = errors.As
	_ = fmt.Println
	_ = log.Fatal
	_ = time.Second
	_ = url.Parse
	_ = retryablehttp.NewClient
	_ = redis.NewClient
	_ = tollgate.New
	_ = costs.New
	_ = youtube.NewTransport
	_ = quota.New
	_ = embedded.New
)

// Names the fragments use without declaring them.
var (
	rdb       redis.UniversalClient
	tr        *tollgate.Transport
	transport http.RoundTripper
	ctx       context.Context
	keys      []string
	err       error
	w         http.ResponseWriter
	r         *http.Request
)
`

// program wraps a Go block as a whole file. Line directives make compile
// errors name the page and the block's own lines.
func program(b block) (string, error) {
	at := fmt.Sprintf("//line %s\n", b.at())
	if strings.HasPrefix(b.code, "package ") {
		return at + b.code, nil
	}
	switch b.kind {
	case "config":
		return "package main\n\n" + harnessImports + "\nfunc main() {}\n\nvar _ = tollgate.Config{\n" + at + b.code + "}\n", nil
	case "", "statements", "quick start":
		uses, err := declared(b.code)
		if err != nil {
			return "", err
		}
		return "package main\n\n" + harnessImports + "\nfunc main() {\n" + at + b.code + uses + "}\n", nil
	}
	return "", fmt.Errorf("unknown snippet kind %q", b.kind)
}

// declared returns a blank use of every name the fragment's top-level
// statements declare, so that the harness compiles a fragment that shows
// a declaration without using it.
func declared(code string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+code+"}\n", 0)
	if err != nil {
		return "", err
	}
	var uses strings.Builder
	use := func(id *ast.Ident) {
		if id.Name != "_" {
			fmt.Fprintf(&uses, "\t_ = %s\n", id.Name)
		}
	}
	for _, s := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					use(e.(*ast.Ident))
				}
			}
		case *ast.DeclStmt:
			for _, spec := range s.Decl.(*ast.GenDecl).Specs {
				if vs, ok := spec.(*ast.ValueSpec); ok {
					for _, id := range vs.Names {
						use(id)
					}
				}
			}
		}
	}
	return uses.String(), nil
}

// TestGoSnippetsCompile builds every Go block of the pages, each as a
// package of its own inside the module (through an overlay: nothing is
// written to the tree), against the public API. A "clienttest" block, a
// whole program that uses an official client, is built inside the
// clienttest module, which requires those clients.
func TestGoSnippetsCompile(t *testing.T) {
	dir := root(t)
	tmp := t.TempDir()
	overlay := map[string]string{}
	pkgs := map[string][]string{} // by the directory of their module
	n := 0
	for i, b := range blocks(t) {
		if b.lang != "go" {
			continue
		}
		module := dir
		if b.kind == "clienttest" {
			if !strings.HasPrefix(b.code, "package ") {
				t.Errorf("%s: a clienttest block must be a whole program", b.at())
				continue
			}
			module = filepath.Join(dir, "clienttest")
		}
		src, err := program(b)
		if err != nil {
			t.Errorf("%s: %v", b.at(), err)
			continue
		}
		file := filepath.Join(tmp, fmt.Sprintf("snippet%d.go", i))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := filepath.Join(module, "internal", "readme", "snippets", fmt.Sprintf("s%d", i))
		overlay[filepath.Join(pkg, "main.go")] = file
		pkgs[module] = append(pkgs[module], pkg)
		n++
	}
	if n < 5 {
		t.Fatalf("found %d Go blocks in the README and docs/; they have more", n)
	}
	spec, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	for module, list := range pkgs {
		// Into a directory of the test's: a lone main package would
		// otherwise leave its binary in the module.
		cmd := exec.Command(goTool(), append([]string{"build", "-overlay", overlayFile, "-o", tmp + string(filepath.Separator)}, list...)...)
		cmd.Dir = module
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the pages' Go snippets do not compile in %s: %v\n%s", module, err, out)
		}
	}
}

// TestShellBlocksRun runs every shell block of the pages that is meant to
// end, with a timeout, in the module's directory: the README's test
// command itself is left out (and the Quick start's, which
// TestQuickStart runs in a module of its own), a
// redis:// address on loopback gets a real redis-server started for the
// test, and every other fixed loopback port a free one.
func TestShellBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands, which build and run the demo; not in -short")
	}
	dir := root(t)
	ran := 0
	for _, b := range blocks(t) {
		if b.lang != "sh" || b.kind == "not run" || b.kind == "quick start" {
			continue
		}
		script := withoutTestCommand(b.code)
		if strings.TrimSpace(script) == "" {
			continue
		}
		script = freePorts(t, script)
		ran++
		t.Run(b.at(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goTool())+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the block ended with %v:\n%s\n--- output:\n%s", err, script, out)
			}
			if strings.Contains(script, "-simulate") && !regexp.MustCompile(`\b0 quota errors`).Match(out) {
				t.Errorf("the simulated API reports quota errors:\n%s", out)
			}
			t.Logf("output:\n%s", out)
		})
	}
	if ran < 2 {
		t.Fatalf("ran %d shell blocks from the README and docs/; they have at least two meant to end", ran)
	}
}

// withoutTestCommand drops the README's test command, which runs this very
// test.
func withoutTestCommand(script string) string {
	var keep []string
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "go test ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// freePorts replaces the fixed loopback ports of a script: the one of a
// redis:// address with a redis-server started for the test, any other
// with a port nothing listens on.
func freePorts(t *testing.T, script string) string {
	t.Helper()
	redisRe := regexp.MustCompile(`redis://127\.0\.0\.1:(\d+)`)
	ports := map[string]string{}
	for _, m := range redisRe.FindAllStringSubmatch(script, -1) {
		if _, done := ports[m[1]]; !done {
			ports[m[1]] = strconv.Itoa(redistest.Start(t).Port)
		}
	}
	for _, m := range regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(script, -1) {
		if _, done := ports[m[1]]; !done {
			ports[m[1]] = strconv.Itoa(freePort(t))
		}
	}
	return regexp.MustCompile(`127\.0\.0\.1:(\d+)`).ReplaceAllStringFunc(script, func(s string) string {
		return "127.0.0.1:" + ports[strings.TrimPrefix(s, "127.0.0.1:")]
	})
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
