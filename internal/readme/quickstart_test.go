package readme

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quickStart returns the README's Quick start: the program (the Go block
// marked "quick start"), the output it prints (the "output" block after
// it) and the commands that build and run it (the shell block marked
// "quick start").
func quickStart(t *testing.T) (program, output, commands block) {
	t.Helper()
	var found [3]bool
	for _, b := range pageBlocks(t, "README.md") {
		switch {
		case b.kind == "quick start" && b.lang == "go":
			program, found[0] = b, true
		case b.kind == "output" && found[0] && !found[1]:
			output, found[1] = b, true
		case b.kind == "quick start" && b.lang == "sh":
			commands, found[2] = b, true
		}
	}
	if found != [3]bool{true, true, true} {
		t.Fatalf("README.md: want a Go block and a shell block marked <!-- readme: quick start --> and an <!-- readme: output --> block after the program; found (program, output, commands) = %v", found)
	}
	return program, output, commands
}

// TestQuickStart does what the README's Quick start tells a newcomer:
// saves the program as app/main.go in an empty directory outside the
// module and runs the Quick start's commands there (go mod init, go get,
// go run), then compares what the program prints with the output the
// README shows. The module is not fetched from the network: a module
// proxy in a directory serves this checkout as the latest version of
// github.com/tollgate/tollgate, and the module cache the other modules.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Quick start in a module of its own; not in -short")
	}
	program, output, commands := quickStart(t)
	if !strings.HasPrefix(program.code, "package main") {
		t.Fatalf("%s: the Quick start is not a whole program", program.at())
	}
	cache := goEnv(t, "GOMODCACHE")
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	serveModule(t, root(t), proxy, "v0.0.1")
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(filepath.Join(work, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "app", "main.go"), []byte(program.code), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", commands.code)
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(goTool())+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off",
		"GOFLAGS=-modcacherw", // so that the test's module cache can be removed
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: the Quick start's commands ended with %v\n--- stdout:\n%s--- stderr:\n%s", commands.at(), err, &stdout, &stderr)
	}
	if got := stdout.String(); got != output.code {
		t.Errorf("%s: the Quick start printed\n%s\nwant (%s)\n%s", program.at(), got, output.at(), output.code)
	}
}

// goEnv returns one variable of the go command's environment.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		t.Fatalf("go env %s is empty", name)
	}
	return v
}

// serveModule lays the module in dir out as version of a module proxy in
// proxy (the GOPROXY protocol over file://): its go.mod and a zip of its
// files, less version control and the nested modules, which a published
// module's zip leaves out too.
func serveModule(t *testing.T, dir, proxy, version string) {
	t.Helper()
	const path = "github.com/tollgate/tollgate"
	at := filepath.Join(proxy, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		version + ".mod":  mod,
		version + ".zip":  moduleZip(t, dir, path+"@"+version),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// moduleZip zips the module's files under prefix, as the module proxy
// protocol wants them.
func moduleZip(t *testing.T, dir, prefix string) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		w, err := z.Create(prefix + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
