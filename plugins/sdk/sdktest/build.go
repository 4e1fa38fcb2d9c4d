// Package sdktest helps tests build and load provider plugins as the real
// subprocesses they are.
package sdktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// Build compiles the main package pkg (an import path or ./relative path as
// `go build` takes it, resolved from the test's working directory) into an
// executable named krops-provider-<name> and returns its path. Each package
// is built once per test binary.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := pkg + "|" + name
	if p, ok := built[key]; ok {
		return p
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "krops-plugins-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	sub := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(key))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(sub, "krops-provider-"+name)
	// Without symbol table and DWARF: the link is most of the time. With
	// -race when this test binary has it, so the plugin reuses the test
	// build's packages instead of compiling its whole graph a second time.
	args := []string{"build", "-ldflags=-s -w", "-o", out, pkg}
	if raceBuild {
		args = append([]string{"build", "-race"}, args[1:]...)
	}
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plugin %s from %s: %v\n%s", name, pkg, err, b)
	}
	built[key] = out
	return out
}

// removeBuilt deletes the plugins Build compiled; Main calls it once the
// tests are over.
func removeBuilt() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	dir, built = "", map[string]string{}
}
