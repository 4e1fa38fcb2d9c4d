package testenv

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildBinary builds the main package in dir (a `go build` package path,
// relative to the test's working directory) into a temporary file named
// name, for end-to-end tests of krops binaries.
func BuildBinary(t testing.TB, dir, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command("go", "build", "-o", out, dir).CombinedOutput(); err != nil {
		t.Fatalf("building %s from %s: %v\n%s", name, dir, err, b)
	}
	return out
}

// Result is a finished command.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// RunBinary runs bin with args in dir and exactly env as its environment.
func RunBinary(t testing.TB, dir string, env []string, bin string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	return Result{Stdout: o.String(), Stderr: e.String(), Code: cmd.ProcessState.ExitCode()}
}
