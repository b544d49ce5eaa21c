package readme

import (
	"bytes"
	"context"
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
// saves the program as app/main.go in an empty directory beside a clone of
// this repository (tollgate/, here a link to this checkout) and runs the
// Quick start's commands in it (go mod init, the require and replace that
// point at the clone, go get, go run), then compares what the program
// prints with the output the README shows. Nothing is fetched from the
// network: the module cache serves the other modules.
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
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(filepath.Join(work, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root(t), filepath.Join(work, "tollgate")); err != nil {
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
		"GOPROXY=file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
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
