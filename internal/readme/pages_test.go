package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxREADMELines is the README's length: a page read in five minutes.
// Whatever more there is to say goes to a page of docs/ with a link.
const maxREADMELines = 250

// TestREADMEIsShort keeps the README under its length and keeps the line
// a newcomer installs tollgate with.
func TestREADMEIsShort(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n >= maxREADMELines {
		t.Errorf("README.md has %d lines, want fewer than %d: move a section to docs/ and link it", n, maxREADMELines)
	}
	if !strings.Contains(string(text), "\ngo get github.com/tollgate/tollgate\n") {
		t.Error("README.md has no line `go get github.com/tollgate/tollgate`")
	}
}

// TestTestCommandIsCIs checks that the test command the README gives is
// the one .ci/run runs: the first line of .ci/run, outside a subshell,
// that starts with "go test".
func TestTestCommandIsCIs(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(root(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var command string
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(line, "go test ") {
			command = line
			break
		}
	}
	if command == "" {
		t.Fatal(".ci/run has no line starting with `go test `")
	}
	for _, b := range pageBlocks(t, "README.md") {
		if b.lang != "sh" {
			continue
		}
		for _, line := range strings.Split(b.code, "\n") {
			if line == command || strings.HasPrefix(line, command+" ") {
				return
			}
		}
	}
	t.Errorf("README.md has no shell line %q, the test command .ci/run runs", command)
}

// TestLinksResolve checks every relative link of the pages: the file it
// names exists, and so does the heading its #anchor names.
func TestLinksResolve(t *testing.T) {
	dir := root(t)
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(dir, filepath.FromSlash(page))
			if file != "" {
				path = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			}
			linked, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: the link %q names no file", page, target)
				continue
			}
			if anchor != "" && !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: the link %q has an anchor into a file that is not a page", page, target)
			}
			if anchor != "" && !anchors(string(linked))[anchor] {
				t.Errorf("%s: the link %q names no heading of %s", page, target, filepath.Base(path))
			}
		}
	}
}

// anchors returns the anchors of a page's headings, as GitHub makes them:
// lower case, spaces as hyphens, punctuation but hyphens and underscores
// dropped.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				a.WriteRune(r)
			}
		}
		out[a.String()] = true
	}
	return out
}
