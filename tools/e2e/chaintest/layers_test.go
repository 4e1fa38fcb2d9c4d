package chaintest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The layers docs/architecture.md describes, as the build sees them (go
// list -deps, test files excluded): a plugin links the SDK and nothing of
// the host; the test harness links no host package; no release binary
// links the harness; no binary links another's packages.
func TestTheLayersHold(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the dependencies of every binary; run without -short")
	}
	const mod = "github.com/kropsdev/krops/"
	deps := func(t *testing.T, pkgs ...string) []string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	forbid := func(t *testing.T, pkg string, bad func(dep string) bool) {
		t.Helper()
		for _, d := range deps(t, pkg) {
			if bad(d) {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
	for _, p := range []string{"aws", "azure", "docker", "gcp", "talos"} {
		forbid(t, "./plugins/"+p, func(d string) bool { return strings.HasPrefix(d, mod+"tools/") })
	}
	forbid(t, "./tools/testenv/...", func(d string) bool { return strings.HasPrefix(d, mod+"tools/kit") })
	bins, err := filepath.Glob(filepath.Join(repoRoot, "tools", "krops-*"))
	if err != nil || len(bins) < 8 {
		t.Fatalf("found %d binaries under tools/ (%v)", len(bins), err)
	}
	for _, b := range bins {
		name := filepath.Base(b)
		forbid(t, "./tools/"+name, func(d string) bool {
			if strings.HasPrefix(d, mod+"tools/testenv") {
				return true
			}
			// Another binary's packages: tools/krops-<other>/...
			rest, ok := strings.CutPrefix(d, mod+"tools/krops-")
			return ok && !strings.HasPrefix("krops-"+rest, name)
		})
	}
}
