package sdktest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/proc"
)

// Main runs a package's tests and then kills every plugin they started,
// whatever path the tests took. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	sdk.CleanupClients()
	os.Exit(code)
}

// Install builds pkg as krops-provider-<name> (see Build) and copies it
// into dir, where a host's plugin discovery finds it. It returns the path.
func Install(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	b, err := os.ReadFile(Build(t, pkg, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, sdk.ExecutablePrefix+name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Buffer collects plugin logs safely from the goroutines that relay them.
// (Plugins may log after a test ended, when t.Log would panic.)
type Buffer = proc.Buffer
