package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// BuildBinary builds the main package in dir (a `go build` package path,
// relative to the test's working directory) into a temporary file named
// name, for end-to-end tests of krops binaries.
func BuildBinary(t testing.TB, dir, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	goBuild(t, out, dir, name)
	return out
}

// BuildFlags are the flags every `go build` a test runs passes: without the
// symbol table and DWARF (-s -w: linking is most of a build whose packages
// are cached, and that halves it; stack traces keep their function names
// and lines from the runtime's own tables), and with -race when the test
// binary itself has it. -race changes every package's build, so without it
// a race test run compiled the whole dependency graph a second time for
// the binaries it runs (minutes on a cold machine); with it the binaries
// reuse the test build's packages, and report races of their own.
func BuildFlags() []string {
	if raceBuild {
		return []string{"-race", "-ldflags=-s -w"}
	}
	return []string{"-ldflags=-s -w"}
}

// TestHooksTag is the build tag that compiles the KROPS_TEST_* hooks (stop
// after a step, die in the middle of the move) into a binary. BuildBinary
// and Builds set it; release builds (`task build`, the toolbox image, the
// real-engine lane's builds with BuildFlags) do not.
const TestHooksTag = "krops_testhooks"

func goBuild(t testing.TB, out, dir, name string) {
	t.Helper()
	args := append(append([]string{"build", "-tags", TestHooksTag}, BuildFlags()...), "-o", out, dir)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("building %s from %s: %v\n%s", name, dir, err, b)
	}
}

// NoTestHooksInRelease fails t unless the release build of the main
// package in dir lacks every marker (the hooks' variable names) that the
// harness's build of it carries: the hooks cannot be reached in a release
// binary, whatever its environment.
func NoTestHooksInRelease(t *testing.T, dir, name string, markers ...string) {
	t.Helper()
	release := filepath.Join(t.TempDir(), name)
	args := append(append([]string{"build"}, BuildFlags()...), "-o", release, dir)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("building the release %s from %s: %v\n%s", name, dir, err, b)
	}
	for _, c := range []struct {
		bin  string
		want bool
	}{{BuildBinary(t, dir, name), true}, {release, false}} {
		b, err := os.ReadFile(c.bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markers {
			if bytes.Contains(b, []byte(m)) != c.want {
				t.Errorf("%s (test hooks compiled in: %v) contains %s: %v", name, c.want, m, !c.want)
			}
		}
	}
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

// Builds builds each binary a test package needs once per test process
// instead of once per test (a link takes seconds). Create it in TestMain
// and Remove it after the tests.
type Builds struct {
	dir   string
	mu    sync.Mutex
	built map[string]string
}

// NewBuilds makes the directory the binaries go to.
func NewBuilds() (*Builds, error) {
	dir, err := os.MkdirTemp("", "krops-test-binaries-")
	if err != nil {
		return nil, err
	}
	return &Builds{dir: dir, built: map[string]string{}}, nil
}

// Binary is BuildBinary, built at most once per dir and name.
func (b *Builds) Binary(t testing.TB, dir, name string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	key := dir + "\x00" + name
	if p, ok := b.built[key]; ok {
		return p
	}
	out := filepath.Join(b.dir, fmt.Sprintf("%d", len(b.built)), name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	goBuild(t, out, dir, name)
	b.built[key] = out
	return out
}

// Remove deletes the binaries.
func (b *Builds) Remove() { _ = os.RemoveAll(b.dir) }
